#!/bin/sh
# Writes contrib/man/frontier-crawl.1 from the CLI's parser (argparse-manpage, in the dev extra);
# tests/unit/test_manpage.py checks that the file is up to date.
set -eu
cd "$(dirname "$0")/../.."
exec argparse-manpage --module frontier_crawl.cli --function _parser \
  --project-name frontier-crawl --prog frontier-crawl \
  --version "$(python -c 'import frontier_crawl; print(frontier_crawl.__version__)')" \
  --manual-title "frontier-crawl manual" \
  --description "polite, crash-safe, memory-bounded web crawler" \
  --include contrib/man/include.txt
