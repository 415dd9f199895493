"""The Classify view: photos in, top-5 and where they ran out; folders as a batch."""
