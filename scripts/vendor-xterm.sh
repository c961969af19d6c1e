#!/usr/bin/env bash
# Vendors xterm.js for the dashboard's terminal: takes the pinned packages
# from the npm registry with `npm pack`, checks each tarball against the
# registry's sha512 integrity, and copies only the files the page needs
# (the script, the stylesheet, the fit addon, their licences) into
# internal/dashboard/static/vendor/xterm/, with a manifest of versions,
# integrity and each file's sha512. Running it again changes nothing.
# internal/dashboard's tests check the files against the manifest.
set -euo pipefail
cd "$(dirname "$0")/.."

xterm_version=6.0.0
fit_version=0.11.0 # released with xterm 6.0.0, from the same commit
dest=internal/dashboard/static/vendor/xterm

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pack NAME VERSION: the tarball's path, its integrity checked.
pack() {
	local name=$1 version=$2 want got file
	want=$(npm view "$name@$version" dist.integrity)
	file=$(cd "$tmp" && npm pack --silent "$name@$version")
	got="sha512-$(openssl dgst -sha512 -binary "$tmp/$file" | base64 -w0)"
	if [ "$got" != "$want" ]; then
		echo "vendor-xterm: $name@$version: integrity $got, the registry says $want" >&2
		exit 1
	fi
	echo "$tmp/$file $want"
}

read -r xterm_tgz xterm_integrity < <(pack @xterm/xterm "$xterm_version")
read -r fit_tgz fit_integrity < <(pack @xterm/addon-fit "$fit_version")

mkdir -p "$tmp/xterm" "$tmp/fit"
tar -xzf "$xterm_tgz" -C "$tmp/xterm" package/lib/xterm.js package/css/xterm.css package/LICENSE
tar -xzf "$fit_tgz" -C "$tmp/fit" package/lib/addon-fit.js package/LICENSE

rm -rf "$dest"
mkdir -p "$dest"
install -m 0644 "$tmp/xterm/package/lib/xterm.js" "$dest/xterm.js"
install -m 0644 "$tmp/xterm/package/css/xterm.css" "$dest/xterm.css"
install -m 0644 "$tmp/xterm/package/LICENSE" "$dest/LICENSE.xterm"
install -m 0644 "$tmp/fit/package/lib/addon-fit.js" "$dest/addon-fit.js"
install -m 0644 "$tmp/fit/package/LICENSE" "$dest/LICENSE.addon-fit"

sha() { sha512sum "$dest/$1" | cut -d' ' -f1; }
cat > "$dest/manifest.json" <<JSON
{
  "packages": [
    {"name": "@xterm/xterm", "version": "$xterm_version", "integrity": "$xterm_integrity", "license": "MIT",
     "files": {"xterm.js": "package/lib/xterm.js", "xterm.css": "package/css/xterm.css", "LICENSE.xterm": "package/LICENSE"}},
    {"name": "@xterm/addon-fit", "version": "$fit_version", "integrity": "$fit_integrity", "license": "MIT",
     "files": {"addon-fit.js": "package/lib/addon-fit.js", "LICENSE.addon-fit": "package/LICENSE"}}
  ],
  "sha512": {
    "LICENSE.addon-fit": "$(sha LICENSE.addon-fit)",
    "LICENSE.xterm": "$(sha LICENSE.xterm)",
    "addon-fit.js": "$(sha addon-fit.js)",
    "xterm.css": "$(sha xterm.css)",
    "xterm.js": "$(sha xterm.js)"
  }
}
JSON
echo "vendored @xterm/xterm $xterm_version and @xterm/addon-fit $fit_version into $dest"
