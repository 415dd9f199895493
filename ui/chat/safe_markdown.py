"""The one rule for an answer in the transcript (a model's, or one read back from the store): it is text to
read, never a reason for the app to touch anything outside itself.

* No resource is loaded from outside the app. A Markdown image (`![x](file:///...)`, a UNC path, http:,
  data:) never reaches the transcript's document: it is shown as a "blocked image" chip with its alt text.
  Qt loads an image while it lays the text out (and, for a local file on a high-DPI screen, looks for its
  @2x sibling first), so the Markdown is parsed in a scratch document that has no layout, made safe
  there, and only then inserted. The transcript's document loads the app's own resources (qrc:) only,
  as a backstop.
* A link opens only on a click, only http(s), in the OS browser (ui.chat.transcript). Its URL is its
  tooltip, and is shown after its text when the text says something else ("docs (https://evil.example)").
  Any other link (file:, smb:, javascript:, a relative path) is plain text, its target shown after it.
* Tooltips over such text are escaped: Qt guesses whether a tooltip is rich text, and would render it.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QFile, QIODevice, QUrl
from PySide6.QtGui import (
    QColor,
    QImage,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
    QTextFormat,
)

from engines import printable
from ui.common.plain import plain_tooltip
from ui.common.theme import colors

# A model's answer is Markdown, never HTML: raw HTML in it (an <img src="file:..."> that the browser
# would load, a <span> that hides text) is shown as text.
MARKDOWN = QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML
OPENABLE_SCHEMES = frozenset({"http", "https"})
SHOWN_URL_CHARS = 300  # a link target shown as text is cut here (a data: URL can be megabytes)


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


def openable(url: QUrl) -> bool:
    """Whether a link may be opened (in the OS browser, on a click): http(s) with a host, nothing else."""
    return url.isValid() and url.scheme().lower() in OPENABLE_SCHEMES and bool(url.host())


def app_resource(url: QUrl) -> bool:
    """Whether a resource is the app's own (compiled into it: qrc:), the only kind the transcript loads."""
    return url.isValid() and url.scheme().lower() == "qrc"


def shown_url(href: str) -> str:
    text = printable(href, newlines=False)
    return text if len(text) <= SHOWN_URL_CHARS else text[: SHOWN_URL_CHARS - 1] + "…"


def markdown_fragment(markdown: str) -> QTextDocumentFragment:
    """`markdown` as rich text to insert into the transcript, with its images blocked and its links tamed."""
    scratch = QTextDocument()  # no layout is ever made for it: nothing in it is measured or loaded
    QTextCursor(scratch).insertMarkdown(markdown, MARKDOWN)
    _block_images(scratch)
    _tame_links(scratch)
    return QTextDocumentFragment(scratch)


class SafeDocument(QTextDocument):
    """The transcript's document: it loads the app's own resources and nothing else (a backstop: no image
    from an answer reaches it, see markdown_fragment)."""

    def loadResource(self, kind: int, name: QUrl | str) -> object:
        name = QUrl(name)
        if app_resource(name):
            file = QFile(":" + name.path())
            if file.open(QIODevice.OpenModeFlag.ReadOnly):
                return file.readAll()
        if kind == QTextDocument.ResourceType.ImageResource.value:
            blank = QImage(1, 1, QImage.Format.Format_ARGB32)  # never null: Qt would read the file itself
            blank.fill(0)
            return blank
        return b""


@dataclass
class _Run:
    start: int
    end: int
    format: QTextCharFormat
    text: str


def _runs(document: QTextDocument) -> list[_Run]:
    runs: list[_Run] = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.isValid():
                start = fragment.position()
                runs.append(_Run(start, start + fragment.length(), fragment.charFormat(), fragment.text()))
            it += 1
        block = block.next()
    return runs


def _groups(runs: list[_Run], key: str) -> list[list[_Run]]:
    """Neighbouring runs with the same key (an image's name, a link's target) as one item."""
    groups: list[list[_Run]] = []
    for run in runs:
        if groups and groups[-1][-1].end == run.start and _key(groups[-1][-1], key) == _key(run, key):
            groups[-1].append(run)
        else:
            groups.append([run])
    return groups


def _key(run: _Run, key: str) -> str:
    return run.format.toImageFormat().name() if key == "image" else run.format.anchorHref()


def _muted() -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(colors().muted))
    return fmt


def _block_images(document: QTextDocument) -> None:
    images = [run for run in _runs(document) if run.format.isImageFormat()]
    for group in reversed(_groups(images, "image")):
        name = group[0].format.toImageFormat().name()
        alt = " ".join(
            " ".join(str(run.format.property(QTextFormat.Property.ImageAltText) or "").split()) for run in group
        ).strip()
        chip = _muted()
        chip.setBackground(QColor(colors().code_bg))
        chip.setToolTip(plain_tooltip(tr("Images in answers are not loaded: {url}").format(url=shown_url(name))))
        if group[0].format.isAnchor():  # an image inside a link: the link stays (and is tamed below)
            chip.setAnchor(True)
            chip.setAnchorHref(group[0].format.anchorHref())
        label = tr("[image not loaded: {alt}]").format(alt=printable(alt)) if alt else tr("[image not loaded]")
        cursor = QTextCursor(document)
        cursor.setPosition(group[0].start)
        cursor.setPosition(group[-1].end, QTextCursor.MoveMode.KeepAnchor)
        cursor.insertText(label, chip)


def _says(text: str, href: str) -> bool:
    """Whether a link's text already says where it goes."""

    def bare(value: str) -> str:
        value = value.strip().lower().rstrip("/")
        for prefix in ("https://", "http://"):
            value = value.removeprefix(prefix)
        return value

    return bare(text) == bare(href)


def _tame_links(document: QTextDocument) -> None:
    links = [run for run in _runs(document) if run.format.isAnchor() and run.format.anchorHref()]
    for group in reversed(_groups(links, "link")):
        href = group[0].format.anchorHref()
        cursor = QTextCursor(document)
        cursor.setPosition(group[0].start)
        cursor.setPosition(group[-1].end, QTextCursor.MoveMode.KeepAnchor)
        fmt = QTextCharFormat()
        if openable(QUrl(href)):
            fmt.setToolTip(plain_tooltip(href))
        else:
            fmt.setAnchor(False)
            fmt.setAnchorHref("")
            fmt.setFontUnderline(False)
            fmt.setForeground(QColor(colors().text))
        cursor.mergeCharFormat(fmt)
        text = "".join(run.text for run in group)
        if not openable(QUrl(href)) or not _says(text, href):
            after = QTextCursor(document)
            after.setPosition(group[-1].end)
            after.insertText(f" ({shown_url(href)})", _muted())
