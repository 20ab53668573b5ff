#!/bin/sh
# azd postdeploy hook: build and stage dist/ (make package: host.json,
# bin/handler for linux/amd64, one folder per function), then deploy dist.zip
# to the Flex Consumption function app. On Flex Consumption,
# `az functionapp deployment source config-zip` publishes through the
# One Deploy endpoint into the app's deployment container.
#
# azd passes the environment's values (outputs of infra/main.bicep) as
# environment variables. To run it by hand, export them first (a bare eval
# sets shell variables that this script, a child process, would not see):
#   set -a; eval "$(azd env get-values)"; set +a; ./scripts/azd-deploy.sh
# or let azd do it: azd hooks run postdeploy
set -eu

cd "$(dirname "$0")/.."

fail() {
	echo "azd-deploy: $*" >&2
	exit 1
}

rg=${AZURE_RESOURCE_GROUP:-}
app=${AZURE_FUNCTION_APP_NAME:-}
[ -n "$rg" ] && [ -n "$app" ] ||
	fail "AZURE_RESOURCE_GROUP and AZURE_FUNCTION_APP_NAME are not set: run 'azd provision' first"
command -v az >/dev/null 2>&1 || fail "az is required (see docs/deploy.md)"

set -- --resource-group "$rg" --name "$app" --src dist.zip
if [ -n "${AZURE_SUBSCRIPTION_ID:-}" ]; then
	set -- "$@" --subscription "$AZURE_SUBSCRIPTION_ID"
fi

make package
[ -f dist.zip ] || fail "make package did not produce dist.zip"

# The first deployment to a new environment can fail with 403 from the
# deployment container while the identity's new role assignment propagates
# (minutes). Retry a bounded number of times; deploying the same zip twice
# is harmless.
attempts=${DEPLOY_ATTEMPTS:-5}
delay=${DEPLOY_RETRY_SECONDS:-30}
n=1
while :; do
	echo "azd-deploy: deploying dist.zip to $app (attempt $n of $attempts)"
	if az functionapp deployment source config-zip "$@"; then
		echo "azd-deploy: deployed to https://${AZURE_FUNCTION_APP_HOSTNAME:-$app.azurewebsites.net}"
		exit 0
	fi
	[ "$n" -lt "$attempts" ] || fail "deployment failed $attempts times; see the output above"
	echo "azd-deploy: retrying in ${delay}s (new role assignments can take minutes to apply)" >&2
	sleep "$delay"
	n=$((n + 1))
done
