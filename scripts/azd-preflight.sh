#!/bin/sh
# azd preprovision hook: fail before anything is created, with one line
# saying what to do, when something the deployment needs is missing or would
# fail later with a less clear error; warn about settings that deploy but
# leave something half-working. Uses shell built-ins only, besides the tools
# it checks (az, azd, go, make).
set -eu

# The oldest Azure CLI that deploys to Flex Consumption through the One
# Deploy endpoint (/api/publish). Older ones use /api/zipdeploy, which Flex
# Consumption rejects with an unclear error.
AZ_MIN_MAJOR=2
AZ_MIN_MINOR=60

fail() {
	echo "azd-preflight: $*" >&2
	exit 1
}

warn() {
	echo "azd-preflight: warning: $*" >&2
}

for tool in az go make; do
	command -v "$tool" >/dev/null 2>&1 || fail "$tool is required and not on PATH: install it (docs/deploy.md, \"What you need\")"
done

# make package zips dist/ with this Go program (no zip tool needed).
root=${0%/*}/..
[ -f "$root/scripts/zipdir.go" ] || fail "scripts/zipdir.go (the packager make package runs) is missing: restore it from the repository"

version=$(az version --query '"azure-cli"' -o tsv 2>/dev/null) || fail "az version failed: reinstall the Azure CLI (docs/deploy.md, \"What you need\")"
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
case "$major.$minor" in
*[!0-9.]* | .* | *.) fail "cannot read the Azure CLI version from 'az version' (got '$version'): upgrade to $AZ_MIN_MAJOR.$AZ_MIN_MINOR or later with 'az upgrade'" ;;
esac
if [ "$major" -lt "$AZ_MIN_MAJOR" ] || { [ "$major" -eq "$AZ_MIN_MAJOR" ] && [ "$minor" -lt "$AZ_MIN_MINOR" ]; }; then
	fail "Azure CLI $version is older than $AZ_MIN_MAJOR.$AZ_MIN_MINOR, which Flex Consumption deployments need: run 'az upgrade'"
fi

user_type=$(az account show --query user.type -o tsv 2>/dev/null) || fail "az is not signed in: run 'az login' (azd and az keep separate sign-ins)"

if [ -n "${AZURE_SUBSCRIPTION_ID:-}" ]; then
	az account show --subscription "$AZURE_SUBSCRIPTION_ID" >/dev/null 2>&1 ||
		fail "az cannot see subscription $AZURE_SUBSCRIPTION_ID: run 'az login' with the account azd uses"
fi

# principalType of the role assignments to the deployer: what az is signed
# in as, not a default. A service principal assigned as User fails to deploy.
case "$user_type" in
user) principal_type=User ;;
servicePrincipal) principal_type=ServicePrincipal ;;
*) fail "az account show says the signed-in account is of type '$user_type': sign in as a user or a service principal with 'az login'" ;;
esac
if [ -z "${AZURE_PRINCIPAL_TYPE:-}" ]; then
	command -v azd >/dev/null 2>&1 || fail "azd is required and not on PATH: install the Azure Developer CLI"
	azd env set AZURE_PRINCIPAL_TYPE "$principal_type" >/dev/null ||
		fail "could not record AZURE_PRINCIPAL_TYPE: run 'azd env set AZURE_PRINCIPAL_TYPE $principal_type'"
	echo "azd-preflight: AZURE_PRINCIPAL_TYPE set to $principal_type (the account az is signed in with)"
elif [ "$AZURE_PRINCIPAL_TYPE" != "$principal_type" ]; then
	fail "az is signed in as a $principal_type but AZURE_PRINCIPAL_TYPE is $AZURE_PRINCIPAL_TYPE, so role assignments to you would fail: run 'azd env set AZURE_PRINCIPAL_TYPE $principal_type'"
fi

# Can the deployer create the resources and the role assignments? Read from
# its role assignments (groups and inherited ones included) by role name:
# create = Owner or Contributor, assign = Owner, User Access Administrator
# or Role Based Access Control Administrator, each on the subscription (or
# above it) or on the environment's resource group rg-<env>. And can it
# create the deployment itself? infra/main.bicep is a subscription-scope
# template, so `azd provision` creates a deployment object on the
# subscription, which needs Microsoft.Resources/deployments/* there (Bicep
# docs, "Required permissions"; deploy-to-subscription): roles on rg-<env>
# alone do not give it. Owner and Contributor on the subscription do; for any
# other role assigned there (the custom role of docs/deploy.md's narrower
# setup) its definition's actions are read. Conditions and roles activated
# just in time cannot be judged, so this warns and carries on; Azure has the
# last word.

# covers_deployments ROLE: does ROLE's definition allow every action on
# Microsoft.Resources/deployments (an action *, Microsoft.Resources/* or
# Microsoft.Resources/deployments/*, not taken back by a NotAction)?
covers_deployments() {
	perms=$(az role definition list --name "$1" \
		--query "[].permissions[].[join(',', actions || \`[]\`), join(',', notActions || \`[]\`)]" -o tsv 2>/dev/null) || return 1
	found=1
	set -f # an action * is a word here, not a file name pattern
	while IFS=$tab read -r actions not_actions; do
		granted=1
		oldifs=$IFS
		IFS=,
		for a in $actions; do
			case "$a" in
			'*' | [Mm]icrosoft.[Rr]esources/'*' | [Mm]icrosoft.[Rr]esources/[Dd]eployments/'*') granted=0 ;;
			esac
		done
		for a in $not_actions; do
			case "$a" in
			'*' | [Mm]icrosoft.[Rr]esources/'*' | [Mm]icrosoft.[Rr]esources/[Dd]eployments*) granted=1 ;;
			esac
		done
		IFS=$oldifs
		[ "$granted" -ne 0 ] || found=0
	done <<PERMS
$perms
PERMS
	set +f
	return "$found"
}

if [ -n "${AZURE_PRINCIPAL_ID:-}" ]; then
	roles=$(az role assignment list --all --assignee "$AZURE_PRINCIPAL_ID" --include-inherited --include-groups \
		--query "[].[roleDefinitionName, scope]" -o tsv 2>/dev/null) || roles=""
	create="" assign="" deploy="" others=""
	tab=$(printf '\t')
	nl='
'
	while IFS=$tab read -r role scope; do
		[ -n "$role" ] || continue
		case "$scope" in
		*/resourceGroups/rg-"${AZURE_ENV_NAME:-}") where="rg-${AZURE_ENV_NAME:-}" ;;
		*/resourceGroups/*) continue ;;
		/subscriptions/*/*) continue ;; # one resource outside the group, not the subscription
		/subscriptions/*)
			# Another subscription's roles do not count.
			[ -z "${AZURE_SUBSCRIPTION_ID:-}" ] || [ "$scope" = "/subscriptions/$AZURE_SUBSCRIPTION_ID" ] || continue
			where="the subscription"
			;;
		*) where="the subscription" ;; # a management group or the root, above it
		esac
		case "$role" in
		Owner) create=${create:-$where} assign=${assign:-$where} ;;
		Contributor) create=${create:-$where} ;;
		"User Access Administrator" | "Role Based Access Control Administrator") assign=${assign:-$where} ;;
		esac
		if [ "$where" = "the subscription" ]; then
			case "$role" in
			Owner | Contributor) deploy=$where ;;
			*) others="$others$role$nl" ;;
			esac
		fi
	done <<ROLES
$roles
ROLES
	if [ -z "$deploy" ] && [ -n "$others" ]; then
		while IFS= read -r role; do
			[ -n "$role" ] && [ -z "$deploy" ] || continue
			if covers_deployments "$role"; then deploy="the subscription"; fi
		done <<OTHERS
$others
OTHERS
	fi
	missing="" deployments=""
	[ -n "$create" ] || missing="Contributor (to create the resources)"
	[ -n "$assign" ] || missing="${missing:+$missing and }Role Based Access Control Administrator or User Access Administrator (to assign the app identity its roles)"
	[ -n "$deploy" ] || deployments="may create deployments on the subscription (Microsoft.Resources/deployments/*: infra/main.bicep is a subscription-scope template, so azd's deployment is an object there; Contributor or Owner on the subscription, or a custom role with those actions there, gives it; roles on rg-${AZURE_ENV_NAME:-<env>} alone do not)"
	if [ -n "$missing" ]; then
		warn "could not confirm that $AZURE_PRINCIPAL_ID has $missing on the subscription or on rg-${AZURE_ENV_NAME:-<env>}${deployments:+, nor that it $deployments}:" \
			"provisioning may fail at the first resource or role assignment (docs/deploy.md, \"Permissions\")"
	elif [ -n "$deployments" ]; then
		warn "could not confirm that $AZURE_PRINCIPAL_ID $deployments:" \
			"Azure would refuse the deployment (AuthorizationFailed) before creating anything (docs/deploy.md, \"Permissions\")"
	fi
fi

# azd passes the environment's values (azd env set) to hooks. Without
# RUNBOOK_BASE_URL every alert links a runbook under a placeholder URL.
if [ -z "${RUNBOOK_BASE_URL:-}" ]; then
	warn "RUNBOOK_BASE_URL is empty: every alert's runbook link will point at a placeholder URL and lead nowhere." \
		"Set it to where alerts/runbooks is browsable: azd env set RUNBOOK_BASE_URL https://github.com/<org>/<repo>/blob/main/alerts/runbooks"
fi

echo "azd-preflight: az $version, go and make found; az can reach the subscription as a $principal_type"
