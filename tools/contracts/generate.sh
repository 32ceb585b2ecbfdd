#!/usr/bin/env bash
# Regenerates the contract artifacts and their Go bindings:
#   1. npm ci (only when node_modules is missing or older than package-lock.json),
#   2. node compile.js  -> build/<Name>.{abi,bin} with the pinned solc,
#   3. abigen --v2      -> pkg/paycontract/<name>.go, one file per contract.
# abigen is run with an explicit @version: inside a module without it, `go run`
# resolves abigen against that module's go.sum and fails.
# Run from anywhere; the Makefile's `generate` target calls it.
set -euo pipefail

ABIGEN_VERSION="v1.17.10"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
out="${root}/pkg/paycontract"

cd "${here}"
if [[ ! -d node_modules || package-lock.json -nt node_modules ]]; then
	npm ci --no-audit --no-fund
fi
node compile.js

mkdir -p "${out}"
# contract name in build/ => Go file name in pkg/paycontract
declare -A contracts=([PaymentLedger]=paymentledger [DevUSDC]=devusdc)
for name in PaymentLedger DevUSDC; do
	go run "github.com/ethereum/go-ethereum/cmd/abigen@${ABIGEN_VERSION}" --v2 \
		--abi "build/${name}.abi" \
		--bin "build/${name}.bin" \
		--pkg paycontract \
		--type "${name}" \
		--out "${out}/${contracts[$name]}.go"
	chmod 0644 "${out}/${contracts[$name]}.go" # abigen writes 0600
	echo "generated ${out#"${root}/"}/${contracts[$name]}.go"
done
