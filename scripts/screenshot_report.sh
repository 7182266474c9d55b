#!/usr/bin/env bash
# Renders a connlab report in headless Chromium and saves a screenshot.
# Usage: scripts/screenshot_report.sh REPORT.html [OUT.png] [WIDTH,HEIGHT]
# Needs Debian's chromium (apt-get install chromium). Nothing is fetched from the
# network: the report is self-contained.
set -euo pipefail
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 REPORT.html [OUT.png] [WIDTH,HEIGHT]   (REPORT.html must exist)" >&2
  exit 2
fi
report=$(realpath "$1")
out=${2:-${report%.html}.png}
size=${3:-1400,4000}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "$0: chromium not found: apt-get install chromium" >&2
  exit 1
fi
timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="$size" --screenshot="$out" "file://$report" 2>/dev/null
echo "$out"
