#!/usr/bin/env bash
# Renders every report page kind from the report crate's test fixtures
# (locality, gateway, peers, loadgen, pipeline, single-IP, index, run page,
# soak), opens each at 1,400 px in headless Chromium and fails when a table
# is wider than the page: a table may be wider only inside a box that
# scrolls (overflow-x auto or scroll) and itself fits, and the page itself
# must not scroll sideways. A script injected into each page measures this
# and writes the result into the DOM; `chromium --dump-dom` prints it.
# (Legends over plotted points are checked from the SVG geometry by
# `cargo test -p connlab-report --test report geometry`.)
#
# Usage: scripts/check_pages.sh [DIR]   (pages kept in DIR; default a temp dir)
# Needs cargo and Debian's chromium; nothing is fetched from the network.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "$0: chromium not found: apt-get install chromium" >&2
  exit 1
fi
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
(cd "$root" && CONNLAB_PAGES_DIR="$dir" cargo test -q -p connlab-report --test report \
  pages::write_every_page_where_asked >/dev/null)
# (No ampersand in it: awk's sub() would put the matched text there.)
read -r -d '' measure <<'JS' || true
<script>
(function () {
  var w = document.documentElement.clientWidth, bad = [];
  function scroller(e) {
    for (var p = e.parentElement; p; p = p.parentElement) {
      if (p === document.body) break;
      var o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll') return p;
    }
    return null;
  }
  document.querySelectorAll('table').forEach(function (t, i) {
    var box = scroller(t) || t, r = box.getBoundingClientRect();
    if (r.right > w + 1) {
      var head = (t.querySelector('th,td') || t).textContent.trim().slice(0, 40);
      bad.push('table ' + i + ' (' + head + ') reaches ' + Math.round(r.right) + ' px');
    }
  });
  if (document.documentElement.scrollWidth > w + 1) {
    bad.push('the page is ' + document.documentElement.scrollWidth + ' px wide');
  }
  var out = document.createElement('pre');
  out.id = 'connlab-check';
  out.textContent = (bad.length ? 'WIDE ' + bad.join('; ') : 'OK') + ' (viewport ' + w + ' px)';
  document.body.appendChild(out);
})();
</script>
JS
failed=0
for page in "$dir"/*.html; do
  kind=$(basename "$page" .html)
  probe="$dir/.probe-$kind.html"
  # The measuring script just before </body> (at the end if there is none).
  awk -v s="$measure" '/<\/body>/ && !done { sub(/<\/body>/, s "</body>"); done = 1 } { print } END { if (!done) print s }' \
    "$page" >"$probe"
  result=$(timeout 120 "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1400,900 --virtual-time-budget=2000 --dump-dom "file://$probe" 2>/dev/null \
    | grep -o '<pre id="connlab-check">[^<]*' | sed 's/.*>//' || true)
  [ -n "${CHECK_PAGES_KEEP:-}" ] || rm -f "$probe"
  if [ -z "$result" ]; then
    echo "$kind: no measurement (the page did not load)"
    failed=1
  elif [ "${result#OK}" != "$result" ]; then
    echo "$kind: $result"
  else
    echo "$kind: $result"
    failed=1
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "check_pages: a table is wider than the page at 1,400 px (pages in $dir)" >&2
  exit 1
fi
echo "check_pages: every table fits 1,400 px (pages in $dir)"
