#!/bin/sh
# azd preprovision hook: fail before anything is created if the tools the
# deploy hook needs are missing or az is signed in to another subscription.
set -eu

fail() {
	echo "azd-preflight: $*" >&2
	exit 1
}

for tool in az go make; do
	command -v "$tool" >/dev/null 2>&1 || fail "$tool is required (see docs/deploy.md)"
done

az account show >/dev/null 2>&1 || fail "az is not signed in: run 'az login' (azd and az keep separate sign-ins)"

if [ -n "${AZURE_SUBSCRIPTION_ID:-}" ]; then
	az account show --subscription "$AZURE_SUBSCRIPTION_ID" >/dev/null 2>&1 ||
		fail "az cannot see subscription $AZURE_SUBSCRIPTION_ID: run 'az login' with the account azd uses"
fi
echo "azd-preflight: az, go and make found; az can reach the subscription"
