#!/usr/bin/env bash
# gobuild.sh GOOS GOARCH OUTDIR PACKAGE...: the one way make builds the binaries it ships (make build,
# make release, make images; docs/adr/0044): -trimpath, stripped, VERSION and REVISION stamped into
# pkg/buildinfo, and, on Linux, statically linked so that they run FROM scratch.
#
# cgo where a C compiler for the target is found (CC_<GOARCH>, else gcc for this machine's architecture,
# else <arch>-linux-gnu-gcc): go-ethereum then recovers signatures with libsecp256k1, about four times
# faster than its pure-Go fallback, which every binary built without one uses (CGO_ENABLED=0; said on
# stderr).
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 GOOS GOARCH OUTDIR PACKAGE..." >&2
  exit 2
fi
os=$1 arch=$2 out=$3
shift 3
: "${GO:=go}" "${VERSION:?VERSION is not set}" "${REVISION:?REVISION is not set}"
buildinfo=github.com/contentledger/contentledger/pkg/buildinfo
ldflags="-s -w -X $buildinfo.stampedVersion=$VERSION -X $buildinfo.stampedRevision=$REVISION"

ccvar=CC_$arch
cc=${!ccvar:-}
if [ -z "$cc" ]; then
  if [ "$arch" = "$($GO env GOHOSTARCH)" ] && [ "$os" = "$($GO env GOHOSTOS)" ]; then
    cc=gcc
  else
    cc=$(case $arch in amd64) echo x86_64;; arm64) echo aarch64;; *) echo "$arch";; esac)-linux-gnu-gcc
  fi
fi

if command -v "$cc" >/dev/null 2>&1; then
  tags=
  if [ "$os" = linux ]; then
    # Static glibc: the resolver and user lookups in Go (netgo, osusergo), nothing dlopen'd.
    tags="-tags netgo,osusergo"
    ldflags="$ldflags -linkmode external -extldflags -static"
  fi
  # shellcheck disable=SC2086
  GOOS=$os GOARCH=$arch CGO_ENABLED=1 CC=$cc $GO build -trimpath $tags -ldflags "$ldflags" -o "$out/" "$@"
else
  echo "gobuild: no C compiler for $os/$arch ($cc): CGO_ENABLED=0, signatures recovered in pure Go (about 4x slower)" >&2
  GOOS=$os GOARCH=$arch CGO_ENABLED=0 $GO build -trimpath -ldflags "$ldflags" -o "$out/" "$@"
fi
