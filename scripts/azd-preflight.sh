#!/bin/sh
# azd preprovision hook: fail before anything is created if the tools the
# deploy hook needs are missing or az is signed in to another subscription;
# warn about settings that deploy but leave something half-working.
set -eu

fail() {
	echo "azd-preflight: $*" >&2
	exit 1
}

warn() {
	echo "azd-preflight: warning: $*" >&2
}

for tool in az go make; do
	command -v "$tool" >/dev/null 2>&1 || fail "$tool is required (see docs/deploy.md)"
done

az account show >/dev/null 2>&1 || fail "az is not signed in: run 'az login' (azd and az keep separate sign-ins)"

if [ -n "${AZURE_SUBSCRIPTION_ID:-}" ]; then
	az account show --subscription "$AZURE_SUBSCRIPTION_ID" >/dev/null 2>&1 ||
		fail "az cannot see subscription $AZURE_SUBSCRIPTION_ID: run 'az login' with the account azd uses"
fi

# azd passes the environment's values (azd env set) to hooks. Without
# RUNBOOK_BASE_URL every alert links a runbook under a placeholder URL.
if [ -z "${RUNBOOK_BASE_URL:-}" ]; then
	warn "RUNBOOK_BASE_URL is empty: every alert's runbook link will point at a placeholder URL and lead nowhere." \
		"Set it to where alerts/runbooks is browsable: azd env set RUNBOOK_BASE_URL https://github.com/<org>/<repo>/blob/main/alerts/runbooks"
fi

echo "azd-preflight: az, go and make found; az can reach the subscription"
