#!/bin/sh
# Runs the real-Azure conformance suites against a deployed azd environment:
# the broker suite (handler/internal/broker/sbbroker) against its Service Bus
# namespace and the store suites (handler/internal/store/tablestore,
# handler/internal/dlstore/dltable) against its storage account, all signed
# in through az (Entra ID, no keys).
#
#   scripts/azure-conformance.sh [setup|tables|broker|all]   (default: all)
#
# setup   creates the two queues the broker suite drains, next to (never
#         instead of) the app's queues: SERVICEBUS_TEST_QUEUE (default
#         conformance, no sessions) and SERVICEBUS_TEST_SESSION_QUEUE (default
#         conformance-sessions), with the production settings; creates a
#         storage account of the job's own for the store suite,
#         CONFORMANCE_STORAGE_ACCOUNT (default c<STORAGE_ACCOUNT_NAME>), with
#         the production account's security settings; gives the signed-in
#         principal Azure Service Bus Data Owner on those two queues and
#         Storage Table Data Contributor on that account only, waiting
#         ROLE_PROPAGATION_SECONDS (default 300) when it had to create one;
#         and removes a data role on the production account that an earlier
#         version of this script gave it. The job never holds a data role on
#         the production account, so it can never read or write the
#         orderstatus or dead-letter tables: setup refuses, before it creates
#         or grants anything, when the signed-in principal holds any other
#         data role on the app's storage account, its tables, or its queues
#         (or on a scope above them), such as the grants GRANT_DEPLOYER_DATA_OWNER
#         gives the deployer.
# tables  deletes any conformance table a killed run left in the job's own
#         account, then runs the table suites there (the order store, the
#         dead-letter store in handler/internal/dlstore/dltable, the
#         producers' outbox), on fresh tables conformance<random> (the
#         outbox's: outboxconformance<random>) that they delete.
# broker  the broker suite; SERVICEBUS_TEST_SLOW=1 adds the lock and TTL
#         expiry cases (minutes).
#
# It reads the environment's values; export them first:
#   set -a; eval "$(azd env get-values)"; set +a
# Each suite's output is also written to CONFORMANCE_LOG_DIR (default
# .run/conformance). A suite that skips counts as a failure here.
set -eu

cd "$(dirname "$0")/.."

fail() {
	echo "azure-conformance: $*" >&2
	exit 1
}

say() {
	echo "azure-conformance: $*"
}

test_queue=${SERVICEBUS_TEST_QUEUE:-conformance}
test_account=${CONFORMANCE_STORAGE_ACCOUNT:-c${STORAGE_ACCOUNT_NAME:-}}
test_session_queue=${SERVICEBUS_TEST_SESSION_QUEUE:-conformance-sessions}
log_dir=${CONFORMANCE_LOG_DIR:-.run/conformance}

# need NAME...: every NAME must be set and non-empty.
need() {
	for name in "$@"; do
		eval "value=\${$name:-}"
		[ -n "$value" ] ||
			fail "$name is not set: export the environment's values first: set -a; eval \"\$(azd env get-values)\"; set +a"
	done
}

# principal prints the object id of the signed-in principal (from the oid
# claim of an ARM token, so it needs no directory read permission), or
# CONFORMANCE_PRINCIPAL_ID when set.
principal() {
	if [ -n "${CONFORMANCE_PRINCIPAL_ID:-}" ]; then
		echo "$CONFORMANCE_PRINCIPAL_ID"
		return
	fi
	token=$(az account get-access-token --query accessToken -o tsv) || fail "az account get-access-token failed: run 'az login'"
	payload=$(echo "$token" | cut -d. -f2 | tr '_-' '/+')
	case $((${#payload} % 4)) in
	2) payload="$payload==" ;;
	3) payload="$payload=" ;;
	esac
	oid=$(echo "$payload" | base64 -d 2>/dev/null | sed -n 's/.*"oid" *: *"\([0-9a-fA-F-]*\)".*/\1/p')
	[ -n "$oid" ] || fail "cannot read the signed-in principal's object id from its token: set CONFORMANCE_PRINCIPAL_ID"
	echo "$oid"
}

# principal_type prints ServicePrincipal or User for the signed-in account.
principal_type() {
	case $(az account show --query user.type -o tsv) in
	servicePrincipal) echo ServicePrincipal ;;
	*) echo User ;;
	esac
}

created_role=0

# grant ROLE SCOPE: give the principal ROLE on SCOPE unless it has it.
grant() {
	n=$(az role assignment list --scope "$2" --role "$1" --query "length([?principalId=='$oid'])" -o tsv)
	if [ "$n" != "0" ]; then
		say "$1 on ${2##*/providers/} already granted"
		return
	fi
	say "granting $1 on ${2##*/providers/}"
	az role assignment create --assignee-object-id "$oid" --assignee-principal-type "$ptype" \
		--role "$1" --scope "$2" -o none ||
		fail "cannot grant $1: the signed-in principal needs User Access Administrator (azd pipeline config grants it) or someone must grant it once (see docs/deploy.md)"
	created_role=1
}

# revoke ROLE SCOPE: remove the principal's ROLE on SCOPE itself, if it has
# it (an assignment an earlier version of this script made).
revoke() {
	n=$(az role assignment list --scope "$2" --role "$1" --query "length([?principalId=='$oid' && scope=='$2'])" -o tsv)
	[ "$n" = "0" ] && return
	say "removing $1 on ${2##*/providers/}: the conformance job holds no data role on the app's storage account"
	az role assignment delete --assignee "$oid" --role "$1" --scope "$2" ||
		fail "cannot remove $1 on ${2##*/providers/}: remove it by hand (docs/deploy.md, The conformance job)"
}

# lower S: S in lower case (ARM resource ids compare case-insensitively).
lower() {
	printf '%s' "$1" | tr '[:upper:]' '[:lower:]'
}

# applies SCOPE RESOURCE: does a role assignment at SCOPE apply to RESOURCE
# or to a part of it: SCOPE is RESOURCE, below it (a table of an account),
# or above it (its resource group, the subscription, a management group)?
applies() {
	s=$(lower "${1%/}")
	r=$(lower "$2")
	case "$s" in
	"" | "$r" | "$r"/* | /providers/microsoft.management/managementgroups/*) return 0 ;;
	esac
	case "$r" in
	"$s"/*) return 0 ;;
	esac
	return 1
}

# no_app_data_role ACCOUNT-ID QUEUE-ID...: fail, naming each, when the
# principal holds a data role (Storage ... Data ..., Azure Service Bus Data
# ...) that applies to the app's storage account ACCOUNT-ID or to one of
# the app's queues. Its other roles (Contributor, the roles on the job's own
# queues and account) are fine.
no_app_data_role() {
	account=$1
	shift
	assignments=$(az role assignment list --all --include-inherited --query "[?principalId=='$oid'].[roleDefinitionName, scope]" -o tsv) ||
		fail "cannot list the role assignments of $oid, so cannot confirm it holds no data role on the app's storage account and queues"
	held=""
	tab=$(printf '\t')
	while IFS=$tab read -r role scope; do
		hit=0
		case "$role" in
		"Storage "*" Data "* | "Storage "*" Data") applies "$scope" "$account" && hit=1 ;;
		"Azure Service Bus Data "*)
			for q in "$@"; do
				if applies "$scope" "$q"; then hit=1; fi
			done
			;;
		esac
		[ "$hit" = 0 ] || held="${held:+$held; }$role on $scope"
	done <<ASSIGNMENTS
$assignments
ASSIGNMENTS
	[ -z "$held" ] ||
		fail "the signed-in principal $oid holds data roles on the app's data: $held. The conformance job must never hold one (it could read and write the orderstatus and dead-letter tables and queues): remove each with az role assignment delete --assignee $oid --role <role> --scope <scope>, and never provision with GRANT_DEPLOYER_DATA_OWNER=true as this identity (docs/deploy.md, The conformance job)"
}

# own_account: the store suite's account must not be the app's.
own_account() {
	need STORAGE_ACCOUNT_NAME
	[ "$test_account" != "$STORAGE_ACCOUNT_NAME" ] ||
		fail "CONFORMANCE_STORAGE_ACCOUNT is the app's storage account $STORAGE_ACCOUNT_NAME: the store suite runs on an account of its own"
}

setup() {
	need AZURE_RESOURCE_GROUP SERVICE_BUS_NAMESPACE STORAGE_ACCOUNT_NAME
	command -v az >/dev/null 2>&1 || fail "az is required (see docs/deploy.md)"
	own_account
	rg=$AZURE_RESOURCE_GROUP
	oid=$(principal)
	ptype=$(principal_type)
	# No data role on the app's data, before anything is created or granted.
	app_account=$(az storage account show --resource-group "$rg" --name "$STORAGE_ACCOUNT_NAME" --query id -o tsv) ||
		fail "cannot read the app's storage account $STORAGE_ACCOUNT_NAME"
	revoke "Storage Table Data Contributor" "$app_account"
	app_queues=""
	for q in "${ORDER_STATUS_QUEUE:-order-status}" "${POISON_QUEUE:-order-status-poison}"; do
		id=$(az servicebus queue show --resource-group "$rg" --namespace-name "$SERVICE_BUS_NAMESPACE" --name "$q" --query id -o tsv) ||
			fail "cannot read the app's queue $q in $SERVICE_BUS_NAMESPACE"
		app_queues="$app_queues $id"
	done
	# shellcheck disable=SC2086 # the ids hold no blanks
	no_app_data_role "$app_account" $app_queues
	for q in "$test_queue" "$test_session_queue"; do
		sessions=false
		[ "$q" = "$test_session_queue" ] && sessions=true
		say "queue $q (sessions $sessions) in $SERVICE_BUS_NAMESPACE"
		az servicebus queue create --resource-group "$rg" --namespace-name "$SERVICE_BUS_NAMESPACE" --name "$q" \
			--enable-session "$sessions" --duplicate-detection true --max-delivery-count 5 --lock-duration PT1M \
			--enable-dead-lettering-on-message-expiration true -o none
	done
	for q in "$test_queue" "$test_session_queue"; do
		grant "Azure Service Bus Data Owner" "$(az servicebus queue show --resource-group "$rg" --namespace-name "$SERVICE_BUS_NAMESPACE" --name "$q" --query id -o tsv)"
	done
	say "storage account $test_account for the store suite (the app's is $STORAGE_ACCOUNT_NAME, which the job gets no data role on)"
	az storage account create --resource-group "$rg" --name "$test_account" --sku Standard_LRS --kind StorageV2 \
		--allow-shared-key-access false --min-tls-version TLS1_2 --allow-blob-public-access false --https-only true -o none
	grant "Storage Table Data Contributor" "$(az storage account show --resource-group "$rg" --name "$test_account" --query id -o tsv)"
	if [ "$created_role" = 1 ]; then
		wait=${ROLE_PROPAGATION_SECONDS:-300}
		say "waiting ${wait}s for the new role assignments to apply"
		sleep "$wait"
	fi
}

# run_suite NAME TEST PACKAGE: go test -run '^TEST$' PACKAGE, output kept in
# $log_dir/NAME.log; fails when the test fails or skips.
run_suite() {
	command -v go >/dev/null 2>&1 || fail "go is required"
	mkdir -p "$log_dir"
	log="$log_dir/$1.log"
	status="$log_dir/$1.status"
	say "$1: go test -race -count=1 -run '^$2\$' -v $3"
	# DefaultAzureCredential uses az's sign-in only (unless told otherwise):
	# in the pipeline AZURE_CLIENT_ID is set without a secret, which would
	# otherwise half-configure its environment credential.
	{
		if AZURE_TOKEN_CREDENTIALS=${AZURE_TOKEN_CREDENTIALS:-AzureCLICredential} \
			go test -race -count=1 -timeout "${CONFORMANCE_TIMEOUT:-45m}" -run "^$2\$" -v "$3" 2>&1; then
			echo 0 >"$status"
		else
			echo 1 >"$status"
		fi
	} | tee "$log"
	if grep -q -- "^--- SKIP: $2 " "$log"; then
		fail "$1: $2 skipped; its settings did not arrive (see $log)"
	fi
	[ "$(cat "$status")" = 0 ] || fail "$1: $2 failed (log: $log)"
	grep -q -- "^--- PASS: $2 " "$log" || fail "$1: $2 did not report a result (log: $log)"
	say "$1: passed"
}

tables() {
	need AZURE_RESOURCE_GROUP OrderStore__serviceUri
	own_account
	ORDERSTATUS_TEST_TABLES_SERVICE_URI=$(az storage account show --resource-group "$AZURE_RESOURCE_GROUP" --name "$test_account" --query primaryEndpoints.table -o tsv) ||
		fail "no storage account $test_account: run setup first"
	# shellcheck disable=SC2154 # from azd env get-values
	[ "$ORDERSTATUS_TEST_TABLES_SERVICE_URI" != "$OrderStore__serviceUri" ] ||
		fail "the store suite's endpoint is the app's ($OrderStore__serviceUri)"
	export ORDERSTATUS_TEST_TABLES_SERVICE_URI
	# Tables a killed run left behind (the suite deletes its own).
	for t in $(az storage table list --account-name "$test_account" --auth-mode login --query "[?starts_with(name, 'conformance')].name" -o tsv); do
		say "deleting table $t left by an earlier run"
		az storage table delete --account-name "$test_account" --auth-mode login --name "$t" -o none
	done
	run_suite tables TestAzureConformance ./handler/internal/store/tablestore/
	run_suite tables-outbox TestAzureConformance ./handler/publish/outbox/
	run_suite dlstore TestAzureConformance ./handler/internal/dlstore/dltable/
}

broker() {
	need ServiceBusConnection__fullyQualifiedNamespace
	# shellcheck disable=SC2154 # from azd env get-values
	SERVICEBUS_TEST_NAMESPACE=$ServiceBusConnection__fullyQualifiedNamespace
	SERVICEBUS_TEST_QUEUE=$test_queue
	SERVICEBUS_TEST_SESSION_QUEUE=$test_session_queue
	export SERVICEBUS_TEST_NAMESPACE SERVICEBUS_TEST_QUEUE SERVICEBUS_TEST_SESSION_QUEUE
	run_suite broker TestConformance ./handler/internal/broker/sbbroker/
}

case ${1:-all} in
setup) setup ;;
tables) tables ;;
broker) broker ;;
all)
	setup
	tables
	broker
	;;
*)
	echo "usage: scripts/azure-conformance.sh [setup|tables|broker|all]" >&2
	exit 2
	;;
esac
