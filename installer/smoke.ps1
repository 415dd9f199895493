<#
.SYNOPSIS
  Smoke test of an NPU Studio MSI on Windows: silent per-user install, the installed app's self-test,
  uninstall that keeps user data, and uninstall with REMOVEUSERDATA=1 that removes it.

.EXAMPLE
  pwsh installer/smoke.ps1 -Msi dist/NPU-Studio-0.1.0-arm64.msi -OutDir smoke-arm64
#>
param(
    [Parameter(Mandatory = $true)] [string] $Msi,
    [string] $OutDir = (Join-Path (Get-Location) 'smoke')
)
$ErrorActionPreference = 'Stop'
New-Item -ItemType Directory -Force -Path $OutDir | Out-Null
$OutDir = (Resolve-Path $OutDir).Path
$MsiPath = (Resolve-Path $Msi).Path

$InstallDir = Join-Path $env:LOCALAPPDATA 'Programs\NPU Studio'
$UserData = Join-Path $env:LOCALAPPDATA 'NPU Studio'
$Shortcut = Join-Path $env:APPDATA 'Microsoft\Windows\Start Menu\Programs\NPU Studio.lnk'

function Invoke-Msiexec([string[]] $Arguments, [string] $LogName) {
    $log = Join-Path $OutDir $LogName
    $all = $Arguments + @('/l*v', "`"$log`"")
    Write-Host "msiexec $($all -join ' ')"
    $p = Start-Process -FilePath 'msiexec.exe' -ArgumentList $all -Wait -PassThru
    if ($p.ExitCode -ne 0) {
        if (Test-Path $log) { Get-Content $log -Tail 80 }
        throw "msiexec $($Arguments -join ' ') exited with $($p.ExitCode)"
    }
}

# Windows Installer's COM API (late-bound: PowerShell has no type library for it).
$Installer = New-Object -ComObject WindowsInstaller.Installer
function Invoke-Com($Object, [string] $Name, [string] $Kind, [object[]] $Arguments) {
    return $Object.GetType().InvokeMember($Name, $Kind, $null, $Object, $Arguments)
}
function Get-MsiProperty([string] $Path, [string] $Property) {
    $db = Invoke-Com $Installer 'OpenDatabase' 'InvokeMethod' @($Path, 0)
    $view = Invoke-Com $db 'OpenView' 'InvokeMethod' @("SELECT ``Value`` FROM ``Property`` WHERE ``Property`` = '$Property'")
    Invoke-Com $view 'Execute' 'InvokeMethod' @() | Out-Null
    $record = Invoke-Com $view 'Fetch' 'InvokeMethod' @()
    $value = Invoke-Com $record 'StringData' 'GetProperty' @(1)
    Invoke-Com $view 'Close' 'InvokeMethod' @() | Out-Null
    # Let go of the database so msiexec can open the package.
    [void][System.Runtime.InteropServices.Marshal]::ReleaseComObject($record)
    [void][System.Runtime.InteropServices.Marshal]::ReleaseComObject($view)
    [void][System.Runtime.InteropServices.Marshal]::ReleaseComObject($db)
    return $value
}
$ProductCode = Get-MsiProperty $MsiPath 'ProductCode'
Write-Host "ProductCode $ProductCode, version $(Get-MsiProperty $MsiPath 'ProductVersion')"

function Assert([bool] $Condition, [string] $Message) {
    if (-not $Condition) { throw "smoke test failed: $Message" }
    Write-Host "ok: $Message"
}

# 1. Silent per-user install: no admin rights, into %LOCALAPPDATA%\Programs\NPU Studio.
Invoke-Msiexec @('/i', "`"$MsiPath`"", '/qn') 'install.log'
Assert (Test-Path (Join-Path $InstallDir 'npu-studio.exe')) "npu-studio.exe installed in $InstallDir"
Assert (Test-Path $Shortcut) "Start-menu shortcut $Shortcut"
$models = Join-Path $InstallDir '_internal\assets\models'
Assert ((Get-ChildItem $models -Filter manifest.json -Recurse).Count -ge 1) "demo models bundled in $models"
Assert ((Invoke-Com $Installer 'ProductState' 'GetProperty' @($ProductCode)) -eq 5) 'product state: installed'
# AssignmentType 0 = installed for the current user only (1 would be per machine).
Assert ((Invoke-Com $Installer 'ProductInfo' 'GetProperty' @($ProductCode, 'AssignmentType')) -eq '0') 'installed per user'

# 2. The installed app's self-test (GUI exe, offscreen-capable; writes a JSON report).
$report = Join-Path $OutDir 'self-test.json'
$shots = Join-Path $OutDir 'screenshots'
$p = Start-Process -FilePath (Join-Path $InstallDir 'npu-studio.exe') `
    -ArgumentList @('--self-test', '--report', "`"$report`"", '--screenshots', "`"$shots`"") -Wait -PassThru
if (Test-Path $report) { Get-Content $report }
Assert ($p.ExitCode -eq 0) "self-test exit code 0 (got $($p.ExitCode))"
Assert (Test-Path $report) "self-test report written"
$null = Get-Content $report -Raw | ConvertFrom-Json

# The console twin for the command line.
$devices = & (Join-Path $InstallDir 'npu-studio-cli.exe') devices --json
Assert ($LASTEXITCODE -eq 0) "npu-studio-cli devices --json exit code 0"
$devices | Set-Content (Join-Path $OutDir 'devices.json')
$parsed = $devices | Out-String | ConvertFrom-Json
Assert ($null -ne $parsed.windows_ml) "devices --json reports the Windows ML catalog state"
Assert (@($parsed.devices | Where-Object { $_.ep -eq 'DmlExecutionProvider' }).Count -ge 1) "DirectML is accounted for"

# The doctor: a strict session on every usable NPU/GPU. Exit 1 means a check failed and was reported
# (a CI runner has no NPU); anything else, or no report, is a crash.
$doctorDir = Join-Path $OutDir 'doctor'
& (Join-Path $InstallDir 'npu-studio-cli.exe') doctor --no-chat --out "$doctorDir"
$doctorExit = $LASTEXITCODE
if (Test-Path (Join-Path $doctorDir 'report.txt')) { Get-Content (Join-Path $doctorDir 'report.txt') }
Assert ($doctorExit -eq 0 -or $doctorExit -eq 1) "npu-studio-cli doctor ran to the end (exit $doctorExit)"
Assert (Test-Path (Join-Path $doctorDir 'diagnostics.zip')) "doctor wrote diagnostics.zip"

# 3. Uninstall keeps the user's data.
$marker = Join-Path $UserData 'NPU Studio\smoke-marker.txt'
New-Item -ItemType Directory -Force -Path (Split-Path $marker) | Out-Null
Set-Content -Path $marker -Value 'user data'
Invoke-Msiexec @('/x', "`"$MsiPath`"", '/qn') 'uninstall.log'
Assert (-not (Test-Path (Join-Path $InstallDir 'npu-studio.exe'))) 'uninstall removed the app'
Assert (-not (Test-Path $Shortcut)) 'uninstall removed the shortcut'
Assert (Test-Path $marker) 'uninstall kept the user data'
Assert ((Invoke-Com $Installer 'ProductState' 'GetProperty' @($ProductCode)) -ne 5) 'product state: not installed'

# 4. Reinstall, then uninstall with REMOVEUSERDATA=1: the user data goes too.
Invoke-Msiexec @('/i', "`"$MsiPath`"", '/qn') 'reinstall.log'
Invoke-Msiexec @('/x', "`"$MsiPath`"", '/qn', 'REMOVEUSERDATA=1') 'uninstall-removeuserdata.log'
Assert (-not (Test-Path $UserData)) 'REMOVEUSERDATA=1 removed the user data'
Write-Host 'smoke test passed'
