// Runs scripts/azure-conformance.sh (what the azure-conformance workflow
// runs) with stub az and go that record their arguments, so what it asks of
// Azure and which suites it runs are checked without Azure.

import test from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';

const script = path.join(repoRoot, 'scripts/azure-conformance.sh');
const script_path = script;
const OID = '11111111-2222-3333-4444-555555555555';
// A token whose payload carries OID (header and signature are not read).
const token = `h.${Buffer.from(JSON.stringify({ oid: OID, tid: 't' })).toString('base64url')}.s`;

const azd = {
  AZURE_RESOURCE_GROUP: 'rg-x',
  SERVICE_BUS_NAMESPACE: 'sb-x',
  STORAGE_ACCOUNT_NAME: 'stx',
  ServiceBusConnection__fullyQualifiedNamespace: 'sb-x.servicebus.windows.net',
  OrderStore__serviceUri: 'https://stx.table.core.windows.net/',
};

// run(t, args, {env, granted, assignments, goOut, goExit, leftover}) runs
// the script with stubs: az answers `role assignment list --scope` with
// granted (count), `role assignment list --all` with assignments (the
// principal's, "role<TAB>scope" lines; listFails: it fails) and `storage
// table list` with leftover (names, one a line), go prints goOut and exits
// goExit. Returns the result and the recorded calls.
function run(t, args, { env = azd, granted = '0', assignments = '', listFails = false, goOut = '--- PASS: X (1.00s)', goExit = 0, leftover = '' } = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'orderstatus-conformance-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const calls = path.join(dir, 'calls');
  writeFileSync(calls, '');
  const stub = (name, body) => {
    writeFileSync(path.join(dir, name), `#!/bin/sh\n${body}\n`);
    chmodSync(path.join(dir, name), 0o755);
  };
  stub('az', `echo "az $*" >>'${calls}'
case "$*" in
"account get-access-token"*) echo '${token}' ;;
"account show"*) echo servicePrincipal ;;
"role assignment list --all"*) ${listFails ? 'echo "AuthorizationFailed" >&2; exit 1' : `printf '%s' '${assignments}'`} ;;
"role assignment list"*) echo '${granted}' ;;
"servicebus queue show"*) echo "/subscriptions/s/resourceGroups/rg-x/providers/Microsoft.ServiceBus/namespaces/sb-x/queues/$(echo "$*" | sed 's/.*--name \\([^ ]*\\).*/\\1/')" ;;
"storage account show"*primaryEndpoints.table*) echo "https://$(echo "$*" | sed 's/.*--name \\([^ ]*\\).*/\\1/').table.core.windows.net/" ;;
"storage account show"*) echo "/subscriptions/s/resourceGroups/rg-x/providers/Microsoft.Storage/storageAccounts/$(echo "$*" | sed 's/.*--name \\([^ ]*\\).*/\\1/')" ;;
"storage table list"*) printf '%s' '${leftover}' ;;
esac`);
  stub('go', `echo "go $* | tables=$ORDERSTATUS_TEST_TABLES_SERVICE_URI ns=$SERVICEBUS_TEST_NAMESPACE q=$SERVICEBUS_TEST_QUEUE sq=$SERVICEBUS_TEST_SESSION_QUEUE cred=$AZURE_TOKEN_CREDENTIALS" >>'${calls}'
test=$(echo "$*" | sed 's/.*-run \\^\\([A-Za-z]*\\).*/\\1/')
echo "${goOut}" | sed "s/X/$test/"
exit ${goExit}`);
  const r = spawnSync('/bin/sh', [script, ...args], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { PATH: `${dir}:/usr/bin:/bin`, ROLE_PROPAGATION_SECONDS: '0', CONFORMANCE_LOG_DIR: path.join(dir, 'logs'), ...env },
  });
  return { ...r, calls: readFileSync(calls, 'utf8').trim().split('\n').filter(Boolean) };
}

test('setup creates the two test queues with the production settings, never touching the app queues', (t) => {
  const r = run(t, ['setup']);
  assert.equal(r.status, 0, r.stderr);
  const creates = r.calls.filter((c) => c.startsWith('az servicebus queue create'));
  assert.equal(creates.length, 2, r.calls.join('\n'));
  for (const [name, sessions] of [['conformance', 'false'], ['conformance-sessions', 'true']]) {
    const c = creates.find((x) => x.includes(`--name ${name} `));
    assert.ok(c, `no queue ${name}: ${creates}`);
    for (const flag of [`--enable-session ${sessions}`, '--duplicate-detection true', '--max-delivery-count 5', '--lock-duration PT1M',
      '--enable-dead-lettering-on-message-expiration true', '--resource-group rg-x', '--namespace-name sb-x']) {
      assert.ok(c.includes(flag), `${name}: ${c} lacks ${flag}`);
    }
  }
  // It reads the app queues' ids (for the data-role check), and nothing else.
  const app = r.calls.filter((c) => /order-status/.test(c));
  assert.deepEqual(app, ['order-status', 'order-status-poison'].map((q) =>
    `az servicebus queue show --resource-group rg-x --namespace-name sb-x --name ${q} --query id -o tsv`), 'setup must not touch the app queues');
});

test('setup grants the signed-in principal (oid from its token) the data roles on the narrowest scopes, then waits', (t) => {
  const r = run(t, ['setup']);
  assert.equal(r.status, 0, r.stderr);
  const grants = r.calls.filter((c) => c.startsWith('az role assignment create'));
  assert.equal(grants.length, 3, grants.join('\n'));
  for (const g of grants) assert.ok(g.includes(`--assignee-object-id ${OID} --assignee-principal-type ServicePrincipal`), g);
  assert.ok(grants.some((g) => g.includes('--role Azure Service Bus Data Owner --scope /subscriptions/s/resourceGroups/rg-x/providers/Microsoft.ServiceBus/namespaces/sb-x/queues/conformance')));
  assert.ok(grants.some((g) => g.includes('--role Azure Service Bus Data Owner --scope /subscriptions/s/resourceGroups/rg-x/providers/Microsoft.ServiceBus/namespaces/sb-x/queues/conformance-sessions')));
  assert.ok(grants.some((g) => g.includes('--role Storage Table Data Contributor --scope /subscriptions/s/resourceGroups/rg-x/providers/Microsoft.Storage/storageAccounts/cstx')));
  assert.match(r.stdout, /waiting 0s for the new role assignments/);
});

test('the store suite runs on a storage account of its own: no data role on the app account, ever', (t) => {
  const r = run(t, ['setup']);
  assert.equal(r.status, 0, r.stderr);
  const create = r.calls.find((c) => c.startsWith('az storage account create'));
  assert.ok(create, r.calls.join('\n'));
  for (const flag of ['--resource-group rg-x', '--name cstx ', '--allow-shared-key-access false', '--min-tls-version TLS1_2',
    '--allow-blob-public-access false', '--https-only true']) {
    assert.ok(create.includes(flag), `${create} lacks ${flag}`);
  }
  const app = '/subscriptions/s/resourceGroups/rg-x/providers/Microsoft.Storage/storageAccounts/stx';
  assert.ok(!r.calls.some((c) => c.startsWith('az role assignment create') && c.endsWith(`--scope ${app} -o none`)),
    `a data role granted on the app's account:
${r.calls.join('\n')}`);
  // One an earlier version granted is removed.
  const earlier = run(t, ['setup'], { granted: '1' });
  assert.equal(earlier.status, 0, earlier.stderr);
  assert.ok(earlier.calls.includes(`az role assignment delete --assignee ${OID} --role Storage Table Data Contributor --scope ${app}`),
    earlier.calls.join('\n'));
  // The app's account named as the suite's is refused.
  const same = run(t, ['setup'], { env: { ...azd, CONFORMANCE_STORAGE_ACCOUNT: 'stx' } });
  assert.equal(same.status, 1);
  assert.match(same.stderr, /is the app's storage account stx: the store suite runs on an account of its own/);
  assert.ok(!same.calls.some((c) => c.startsWith('az role assignment create') || c.startsWith('az storage account create')), same.calls.join('\n'));
});

test('tables deletes what a killed run left, then runs the suite on the own account, never on the app tables', (t) => {
  const r = run(t, ['tables'], { leftover: 'conformanceabc\nconformancedef' });
  assert.equal(r.status, 0, r.stderr);
  const deletes = r.calls.filter((c) => c.startsWith('az storage table delete'));
  assert.deepEqual(deletes, ['conformanceabc', 'conformancedef'].map((n) => `az storage table delete --account-name cstx --auth-mode login --name ${n} -o none`));
  assert.ok(r.calls.some((c) => c.startsWith('az storage table list --account-name cstx') && c.includes("starts_with(name, 'conformance')")), r.calls.join('\n'));
  const goAt = r.calls.findIndex((c) => c.startsWith('go test'));
  assert.ok(goAt > r.calls.indexOf(deletes[1]), 'the leftovers go before the suite runs');
  assert.ok(!r.calls.some((c) => / stx\b|orderstatus|deadletter/.test(c.replace('https://stx', ''))), r.calls.join('\n'));
});

test('setup grants nothing and does not wait when the roles are there', (t) => {
  const r = run(t, ['setup'], { granted: '1' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.calls.filter((c) => c.startsWith('az role assignment create')), []);
  assert.doesNotMatch(r.stdout, /waiting/);
});

test('tables and broker run their suite against the environment, with az as the credential', (t) => {
  const tables = run(t, ['tables']);
  assert.equal(tables.status, 0, tables.stderr);
  assert.match(tables.calls.join('\n'), /^go test -race -count=1 -timeout 45m -run \^TestAzureConformance\$ -v \.\/handler\/internal\/store\/tablestore\/ \| tables=https:\/\/cstx\.table\.core\.windows\.net\/ .* cred=AzureCLICredential$/m);
  assert.match(tables.calls.join('\n'), /^go test -race -count=1 -timeout 45m -run \^TestAzureConformance\$ -v \.\/handler\/internal\/dlstore\/dltable\/ \| tables=https:\/\/cstx\.table\.core\.windows\.net\/ .* cred=AzureCLICredential$/m);
  const broker = run(t, ['broker']);
  assert.equal(broker.status, 0, broker.stderr);
  assert.match(broker.calls.join('\n'), /^go test .*-run \^TestConformance\$ -v \.\/handler\/internal\/broker\/sbbroker\/ \| .*ns=sb-x\.servicebus\.windows\.net q=conformance sq=conformance-sessions cred=AzureCLICredential$/m);
});

test('a suite that fails, skips or reports nothing fails the script', (t) => {
  const failed = run(t, ['tables'], { goOut: '--- FAIL: X (1.00s)', goExit: 1 });
  assert.equal(failed.status, 1);
  assert.match(failed.stderr, /tables: TestAzureConformance failed/);
  const skipped = run(t, ['broker'], { goOut: '--- SKIP: X (0.00s)' });
  assert.equal(skipped.status, 1);
  assert.match(skipped.stderr, /broker: TestConformance skipped/);
  const silent = run(t, ['broker'], { goOut: 'ok' });
  assert.equal(silent.status, 1);
  assert.match(silent.stderr, /did not report a result/);
});

test('missing environment values and a bad argument fail with one line saying what to do', (t) => {
  const { OrderStore__serviceUri: _, ...withoutUri } = azd;
  const missing = run(t, ['tables'], { env: withoutUri });
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /^azure-conformance: OrderStore__serviceUri is not set: export the environment's values first: set -a; eval "\$\(azd env get-values\)"; set \+a\n$/);
  const bad = run(t, ['everything']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /^usage: scripts\/azure-conformance\.sh \[setup\|tables\|broker\|all\]\n$/);
});

test('the table suites never use the app\'s tables: no table name reaches them, and each creates conformance<random> tables', (t) => {
  const tables = run(t, ['tables'], { env: { ...azd, OrderStore__tableName: 'orderstatus', DEAD_LETTER_TABLE: 'deadletters' } });
  assert.equal(tables.status, 0, tables.stderr);
  const goCalls = tables.calls.filter((c) => c.startsWith('go test'));
  assert.equal(goCalls.length, 3, goCalls.join('\n'));
  const script = readFileSync(script_path, 'utf8');
  assert.doesNotMatch(script, /OrderStore__tableName|DEAD_LETTER_TABLE|deadletters\b/, 'the script must not hand an app table to a suite');
  for (const file of ['handler/internal/store/tablestore/azure_test.go', 'handler/internal/dlstore/dltable/azure_test.go']) {
    const src = readFileSync(path.join(repoRoot, file), 'utf8');
    assert.match(src, /const azureTablePrefix = "conformance"/, `${file}: tables of its own, named conformance<random>`);
    assert.match(src, /table := azureTablePrefix \+ strings\.ToLower\(rand\.Text\(\)\)/, `${file}: a fresh random table per case`);
    assert.match(src, /t\.Cleanup\(func\(\) \{ deleteAzureTable\(t, svc, table\) \}\)/, `${file}: deletes the tables it created`);
    assert.doesNotMatch(src, /os\.Getenv\("(DEAD_LETTER_TABLE|OrderStore__tableName)"\)/, `${file}: reads no app table setting`);
  }
  // The producers' outbox suite makes outboxconformance<random> tables of its own.
  const outbox = readFileSync(path.join(repoRoot, 'handler/publish/outbox/azure_test.go'), 'utf8');
  assert.match(outbox, /"outboxconformance" \+ strings\.ToLower\(rand\.Text\(\)\)/, 'the outbox suite: tables of its own');
  assert.doesNotMatch(outbox, /os\.Getenv\("(DEAD_LETTER_TABLE|OrderStore__tableName)"\)/, 'the outbox suite reads no app table setting');
});

// The job's identity is the pipeline's service principal, the deployer of
// azure-dev.yml: with GRANT_DEPLOYER_DATA_OWNER it would have got Storage
// Table Data Contributor on the app's tables and Service Bus Data Owner on
// its queues. Setup refuses, before it creates or grants anything, while the
// principal holds a data role that applies to the app's storage account (at
// it, on a table of it, or above it) or to the app's queues; its roles on
// the job's own account and queues, and roles without data rights, pass.
test('setup refuses while the signed-in principal holds a data role on the app\'s account, tables or queues', async (t) => {
  const rg = '/subscriptions/s/resourceGroups/rg-x';
  const acct = `${rg}/providers/Microsoft.Storage/storageAccounts/stx`;
  const ns = `${rg}/providers/Microsoft.ServiceBus/namespaces/sb-x`;
  for (const [name, assignments, refused] of [
    ['Table Data Contributor on the orderstatus table (the deployer grant)', `Storage Table Data Contributor\t${acct}/tableServices/default/tables/orderstatus`, true],
    ['Table Data Contributor on the dead-letter table', `Storage Table Data Contributor\t${acct}/tableServices/default/tables/deadletters`, true],
    ['Blob Data Reader on the app account', `Storage Blob Data Reader\t${acct}`, true],
    ['a storage data role on the resource group', `Storage Table Data Reader\t${rg}`, true],
    ['a storage data role on the subscription, ids in another case', 'Storage Table Data Contributor\t/subscriptions/S', true],
    ['a storage data role from a management group', 'Storage Queue Data Contributor\t/providers/Microsoft.Management/managementGroups/mg', true],
    ['Service Bus Data Owner on order-status (the deployer grant)', `Azure Service Bus Data Owner\t${ns}/queues/order-status`, true],
    ['Service Bus Data Receiver on the namespace', `Azure Service Bus Data Receiver\t${ns}`, true],
    ['the job\'s own roles', `Storage Table Data Contributor\t${rg}/providers/Microsoft.Storage/storageAccounts/cstx\nAzure Service Bus Data Owner\t${ns}/queues/conformance\nAzure Service Bus Data Owner\t${ns}/queues/conformance-sessions`, false],
    ['Contributor and Role Based Access Control Administrator on the group', `Contributor\t${rg}\nRole Based Access Control Administrator\t${rg}`, false],
    ['a storage data role on another account whose name starts with the app\'s', `Storage Table Data Contributor\t${acct}2`, false],
  ]) {
    await t.test(name, (t) => {
      const r = run(t, ['setup'], { assignments });
      const changes = r.calls.filter((c) => /^az (role assignment create|servicebus queue create|storage account create)/.test(c));
      if (!refused) {
        assert.equal(r.status, 0, r.stderr);
        return;
      }
      assert.equal(r.status, 1, `exit ${r.status}; stderr ${r.stderr}`);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      const [role, scope] = assignments.split('\t');
      assert.ok(r.stderr.includes(`holds data roles on the app's data: ${role} on ${scope}.`), r.stderr);
      assert.match(r.stderr, /az role assignment delete --assignee 11111111-2222-3333-4444-555555555555 --role <role> --scope <scope>.*GRANT_DEPLOYER_DATA_OWNER=true.*docs\/deploy\.md, The conformance job/);
      assert.deepEqual(changes, [], 'refused after changing something');
    });
  }
  // Every one held is named, in one line.
  const two = run(t, ['setup'], { assignments: `Storage Table Data Contributor\t${acct}/tableServices/default/tables/orderstatus\nAzure Service Bus Data Owner\t${ns}/queues/order-status-poison` });
  assert.equal(two.status, 1);
  assert.match(two.stderr, /tables\/orderstatus; Azure Service Bus Data Owner on .*queues\/order-status-poison\./);
  // The app queues named by the environment are the ones checked.
  const renamed = run(t, ['setup'], { env: { ...azd, ORDER_STATUS_QUEUE: 'os2', POISON_QUEUE: 'os2-poison' }, assignments: `Azure Service Bus Data Owner\t${ns}/queues/os2-poison` });
  assert.equal(renamed.status, 1, renamed.stderr);
  // Roles that cannot be listed cannot be confirmed: refused too.
  const unlisted = run(t, ['setup'], { listFails: true });
  assert.equal(unlisted.status, 1);
  assert.match(unlisted.stderr, /cannot list the role assignments of 11111111-2222-3333-4444-555555555555/);
  assert.ok(!unlisted.calls.some((c) => /^az (role assignment create|servicebus queue create|storage account create)/.test(c)), unlisted.calls.join('\n'));
  // The query asks for the principal's assignments at every scope, inherited ones included.
  const call = run(t, ['setup']).calls.find((c) => c.startsWith('az role assignment list --all'));
  assert.equal(call, "az role assignment list --all --include-inherited --query [?principalId=='11111111-2222-3333-4444-555555555555'].[roleDefinitionName, scope] -o tsv");
});
