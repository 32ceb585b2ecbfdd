#!/bin/sh
# Prepares deployments/compose for `docker compose up` (deployments/README.md, "Compose"):
#   .env   from .env.example, every empty secret filled with a random one (kept if .env exists);
#   pki/   the raft peer port's CA and one certificate per validator, made by ledgerctl certs
#          (kept if pki/ exists; delete it to make new ones).
# LEDGERCTL names the ledgerctl binary (default: bin/ledgerctl of the repository, from make build).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ledgerctl=${LEDGERCTL:-$repo/bin/ledgerctl}
cd "$here"

if [ ! -e .env ]; then
	(
		umask 077
		while IFS= read -r line; do
			case $line in
			*=) printf '%s%s\n' "$line" "$(openssl rand -hex 32)" ;;
			*) printf '%s\n' "$line" ;;
			esac
		done <.env.example >.env
	)
	echo "wrote $here/.env (mode 0600)"
fi

if [ ! -e pki ]; then
	[ -x "$ledgerctl" ] || { echo "prepare.sh: $ledgerctl not found: run make build, or set LEDGERCTL" >&2; exit 1; }
	"$ledgerctl" certs ca --out pki --name contentledger-compose >/dev/null
	for id in 1 2 3; do
		"$ledgerctl" certs node --ca pki --id "$id" --host "validator-$id" --out "pki/v$id" >/dev/null
		# The validators run as their image's user, not as yours: these throwaway files are made
		# readable to it. A real deployment keeps keys 0600, owned by the service's user.
		chmod 0755 "pki/v$id"
		chmod 0644 "pki/v$id/node-$id.crt" "pki/v$id/node-$id.key"
	done
	chmod 0644 pki/ca.crt
	echo "wrote $here/pki (CA and node certificates 1-3; the CA key stays here)"
fi
