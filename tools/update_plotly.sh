#!/usr/bin/env bash
# Refresh the plotly.js bundle the report pages inline: the "cartesian" partial bundle
# plotly publishes on npm (scatter, bar, heatmap and the other 2-D traces the pages draw),
# stored gzipped. Usage: tools/update_plotly.sh 4.1.1
set -euo pipefail
version="${1:?usage: tools/update_plotly.sh VERSION}"
dest="$(cd "$(dirname "$0")/.." && pwd)/src/sim2real/report/static"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "plotly.js-cartesian-dist-min@${version}" >/dev/null && tar xzf ./*.tgz)
gzip -9n -c "$work/package/plotly-cartesian.min.js" > "$dest/plotly-cartesian.min.js.gz"
cp "$work/package/LICENSE" "$dest/plotly-LICENSE.txt"
echo "plotly.js cartesian ${version}: $(wc -c < "$dest/plotly-cartesian.min.js.gz") bytes gzipped"
