// The decisions of scripts/azd-preflight.sh (the azd preprovision hook),
// made by running it with stub az, azd, go and make on an otherwise empty
// PATH: the script uses shell built-ins only, so a tool left out of the stub
// directory is a missing tool. Each stub records its arguments, so a test
// can also see what the script asked azd to do.

import test from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, chmodSync, rmSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';

const script = path.join(repoRoot, 'scripts/azd-preflight.sh');

// An az stub that answers `az version`, `az account show`, `az role
// assignment list` and `az role definition list --name R` from the options:
// version (the azure-cli version), userType ('user', 'servicePrincipal'),
// signedIn (false: account show fails), roles (the deployer's role
// assignments, "role<TAB>scope" lines), definitions (role name to its
// permissions, "actions<TAB>notActions" lines with the actions joined by
// commas, as the script's query asks; a role not named: no definition).
const subscriptionRoles = 'Contributor\t/subscriptions/s\nUser Access Administrator\t/subscriptions/s';
// The built-in roles' actions (Azure built-in roles, Privileged:
// https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/privileged)
// and docs/deploy.md's custom role for the narrower setup.
const roleDefinitions = {
  'User Access Administrator': '*/read,Microsoft.Authorization/*,Microsoft.Support/*\t',
  'Role Based Access Control Administrator': 'Microsoft.Authorization/roleAssignments/write,Microsoft.Authorization/roleAssignments/delete,*/read,Microsoft.Support/*\t',
  'orderstatus deployments': 'Microsoft.Resources/deployments/*,Microsoft.Resources/subscriptions/resourceGroups/read\t',
};
function azStub({ version = '2.67.0', userType = 'user', signedIn = true, roles = subscriptionRoles, definitions = roleDefinitions }) {
  const defs = Object.entries(definitions).map(([name, perms]) => `    "${name}") printf '%s\\n' '${perms}';;`).join('\n');
  return `#!/bin/sh
echo "az $*" >> "$STUB_LOG"
case "$1 $2" in
  "version --query") echo "${version}"; exit 0;;
  "role assignment") printf '%s\\n' '${roles}'; exit 0;;
  "role definition")
    case "$5" in
${defs}
    esac
    exit 0;;
  "account show") ${signedIn ? `[ "$3" = "--query" ] && echo "${userType}"; exit 0` : 'echo "Please run az login" >&2; exit 1'};;
esac
exit 0
`;
}

/**
 * Runs the preflight with stubs. tools: which stubs exist (default all);
 * az: azStub options; env: extra environment. Returns {status, stdout,
 * stderr, calls} with calls the stubs' recorded command lines.
 */
function preflight(t, { tools = ['az', 'azd', 'go', 'make'], az = {}, env = {}, source = script } = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'orderstatus-preflight-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const log = path.join(dir, 'calls.log');
  const bodies = {
    az: azStub(az),
    azd: '#!/bin/sh\necho "azd $*" >> "$STUB_LOG"\nexit 0\n',
    go: '#!/bin/sh\necho "go $*" >> "$STUB_LOG"\nexit 0\n',
    make: '#!/bin/sh\necho "make $*" >> "$STUB_LOG"\nexit 0\n',
  };
  const bin = path.join(dir, 'bin');
  spawnSync('mkdir', [bin]);
  for (const tool of tools) {
    writeFileSync(path.join(bin, tool), bodies[tool]);
    chmodSync(path.join(bin, tool), 0o755);
  }
  const r = spawnSync('/bin/sh', [source], {
    encoding: 'utf8',
    timeout: 10_000,
    env: { PATH: bin, STUB_LOG: log, AZURE_PRINCIPAL_TYPE: 'User', RUNBOOK_BASE_URL: 'https://example.com/rb',
      AZURE_PRINCIPAL_ID: 'p-1', AZURE_ENV_NAME: 'dev', ...env },
  });
  const calls = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, calls };
}

// A failure is one line on stderr that says what to do.
function assertOneLineFailure(r, want) {
  assert.equal(r.status, 1, `exit ${r.status}, want 1; stderr:\n${r.stderr}`);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `want one line on stderr, got:\n${r.stderr}`);
  assert.match(lines[0], want);
}

test('preflight passes with current tools, signed in as a user whose type matches', (t) => {
  const r = preflight(t);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  assert.match(r.stdout, /az 2\.67\.0, go and make found/);
  assert.ok(!r.calls.some((c) => c.startsWith('azd ')), `azd was called: ${r.calls}`);
});

test('preflight fails on an Azure CLI older than 2.60, comparing versions as numbers', async (t) => {
  for (const [version, ok] of [['2.59.0', false], ['2.6.0', false], ['1.99.0', false], ['2.60.0', true], ['2.100.1', true], ['3.0.0', true]]) {
    await t.test(version, (t) => {
      const r = preflight(t, { az: { version } });
      if (ok) assert.equal(r.status, 0, r.stderr);
      else assertOneLineFailure(r, new RegExp(`Azure CLI ${version.replace(/\./g, '\\.')} is older than 2\\.60.*run 'az upgrade'`));
    });
  }
  const garbled = preflight(t, { az: { version: 'unknown' } });
  assertOneLineFailure(garbled, /cannot read the Azure CLI version .*'unknown'/);
});

test('preflight fails when a service principal would be assigned roles as a User', (t) => {
  const r = preflight(t, { az: { userType: 'servicePrincipal' }, env: { AZURE_PRINCIPAL_TYPE: 'User' } });
  assertOneLineFailure(r, /signed in as a ServicePrincipal but AZURE_PRINCIPAL_TYPE is User.*azd env set AZURE_PRINCIPAL_TYPE ServicePrincipal/);
  const user = preflight(t, { az: { userType: 'user' }, env: { AZURE_PRINCIPAL_TYPE: 'ServicePrincipal' } });
  assertOneLineFailure(user, /signed in as a User but AZURE_PRINCIPAL_TYPE is ServicePrincipal/);
});

test('preflight sets AZURE_PRINCIPAL_TYPE from az account show when it is unset', (t) => {
  const sp = preflight(t, { az: { userType: 'servicePrincipal' }, env: { AZURE_PRINCIPAL_TYPE: '' } });
  assert.equal(sp.status, 0, sp.stderr);
  assert.ok(sp.calls.includes('azd env set AZURE_PRINCIPAL_TYPE ServicePrincipal'), `calls: ${sp.calls.join('; ')}`);
  const user = preflight(t, { env: { AZURE_PRINCIPAL_TYPE: '' } });
  assert.ok(user.calls.includes('azd env set AZURE_PRINCIPAL_TYPE User'), `calls: ${user.calls.join('; ')}`);
  const noAzd = preflight(t, { tools: ['az', 'go', 'make'], env: { AZURE_PRINCIPAL_TYPE: '' } });
  assertOneLineFailure(noAzd, /azd is required/);
});

test('preflight fails, naming the tool, when az, go or make is missing', async (t) => {
  for (const missing of ['az', 'go', 'make']) {
    await t.test(missing, (t) => {
      const r = preflight(t, { tools: ['az', 'azd', 'go', 'make'].filter((x) => x !== missing) });
      assertOneLineFailure(r, new RegExp(`^azd-preflight: ${missing} is required and not on PATH: install it`));
    });
  }
});

test('preflight fails when az is not signed in or cannot see the subscription', (t) => {
  assertOneLineFailure(preflight(t, { az: { signedIn: false } }), /az is not signed in: run 'az login'/);
});

test('preflight warns, without failing, when RUNBOOK_BASE_URL is empty', (t) => {
  const params = JSON.parse(readFileSync(path.join(repoRoot, 'infra/main.parameters.json'), 'utf8')).parameters;
  assert.equal(params.runbookBaseUrl?.value, '${RUNBOOK_BASE_URL}', 'runbookBaseUrl must come from RUNBOOK_BASE_URL');
  const unset = preflight(t, { env: { RUNBOOK_BASE_URL: '' } });
  assert.equal(unset.status, 0, unset.stderr);
  assert.match(unset.stderr, /warning: RUNBOOK_BASE_URL is empty/);
  const set = preflight(t);
  assert.doesNotMatch(set.stderr, /RUNBOOK_BASE_URL/);
});

const groupRoles = 'Contributor\t/subscriptions/s/resourceGroups/rg-dev\nRole Based Access Control Administrator\t/subscriptions/s/resourceGroups/rg-dev';

test('preflight warns, without failing, when the deployer\'s roles cannot be confirmed', async (t) => {
  for (const [name, roles, want] of [
    ['Contributor and User Access Administrator on the subscription', subscriptionRoles, null],
    ['Owner on the subscription', 'Owner\t/subscriptions/s', null],
    ['the narrower setup as docs/deploy.md gives it: both on the resource group, the deployments role on the subscription',
      `${groupRoles}\norderstatus deployments\t/subscriptions/s`, null],
    ['Contributor only', 'Contributor\t/subscriptions/s', /could not confirm that p-1 has Role Based Access Control Administrator or User Access Administrator \(to assign/],
    ['roles on another resource group', 'Owner\t/subscriptions/s/resourceGroups/rg-other', /could not confirm that p-1 has Contributor \(to create the resources\) and Role Based/],
    ['no roles', '', /could not confirm that p-1 has Contributor/],
  ]) {
    await t.test(name, (t) => {
      const r = preflight(t, { az: { roles } });
      assert.equal(r.status, 0, r.stderr);
      if (want) {
        assert.match(r.stderr, want);
        assert.match(r.stderr, /docs\/deploy\.md, "Permissions"/);
        assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      } else assert.equal(r.stderr, '');
    });
  }
  const call = preflight(t).calls.find((c) => c.startsWith('az role assignment list'));
  assert.equal(call, 'az role assignment list --all --assignee p-1 --include-inherited --include-groups --query [].[roleDefinitionName, scope] -o tsv');
});

// infra/main.bicep is a subscription-scope template: azd's deployment is an
// object on the subscription and needs Microsoft.Resources/deployments/*
// there, which roles on the resource group alone do not give. The preflight
// warns (exit 0: a condition or a role activated just in time cannot be
// judged from here) unless a role on the subscription, or above it, covers
// it: Owner or Contributor by name, any other by its definition's actions.
test('preflight warns when no role on the subscription covers the deployment itself', async (t) => {
  const want = /^azd-preflight: warning: could not confirm that p-1 may create deployments on the subscription \(Microsoft\.Resources\/deployments\/\*: .*roles on rg-dev alone do not\): Azure would refuse the deployment/;
  for (const [name, roles, opts, warns] of [
    ['the two group roles only (the narrower setup without its subscription role)', groupRoles, {}, true],
    ['the two group roles and the custom deployments role on the subscription', `${groupRoles}\norderstatus deployments\t/subscriptions/s`, {}, false],
    ['the custom deployments role inherited from a management group', `${groupRoles}\norderstatus deployments\t/providers/Microsoft.Management/managementGroups/mg`, {}, false],
    ['the custom deployments role on another subscription', `${groupRoles}\norderstatus deployments\t/subscriptions/other`, { env: { AZURE_SUBSCRIPTION_ID: 's' } }, true],
    ['the custom deployments role on one resource, not the subscription', `${groupRoles}\norderstatus deployments\t/subscriptions/s/providers/Microsoft.Foo/bars/b`, {}, true],
    ['User Access Administrator on the subscription (no deployments action)', `${groupRoles}\nUser Access Administrator\t/subscriptions/s`, {}, true],
    ['Contributor on the subscription', `${groupRoles}\nContributor\t/subscriptions/s`, {}, false],
    ['a custom role with * that takes deployments back', `${groupRoles}\nalmost all\t/subscriptions/s`,
      { az: { definitions: { 'almost all': '*\tMicrosoft.Resources/deployments/write' } } }, true],
    ['a custom role with Microsoft.Resources/*', `${groupRoles}\nresources\t/subscriptions/s`,
      { az: { definitions: { resources: 'microsoft.resources/*\t' } } }, false],
    ['a role whose definition cannot be read', `${groupRoles}\nunknown role\t/subscriptions/s`, {}, true],
  ]) {
    await t.test(name, (t) => {
      const r = preflight(t, { ...opts, az: { roles, ...opts.az } });
      assert.equal(r.status, 0, r.stderr);
      if (warns) {
        assert.match(r.stderr, want);
        assert.match(r.stderr, /docs\/deploy\.md, "Permissions"/);
        assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      } else assert.equal(r.stderr, '');
    });
  }
  // Missing the group roles as well: one line names everything missing.
  const none = preflight(t, { az: { roles: '' } });
  assert.match(none.stderr, /could not confirm that p-1 has Contributor .* on the subscription or on rg-dev, nor that it may create deployments on the subscription/);
  assert.equal(none.stderr.trim().split('\n').length, 1, none.stderr);
  // A custom role is judged by its definition, read with the script's query.
  const call = preflight(t, { az: { roles: `${groupRoles}\norderstatus deployments\t/subscriptions/s` } }).calls
    .find((c) => c.startsWith('az role definition list'));
  assert.equal(call, "az role definition list --name orderstatus deployments --query [].permissions[].[join(',', actions || `[]`), join(',', notActions || `[]`)] -o tsv");
  // Owner or Contributor on the subscription: no definition is read.
  assert.ok(!preflight(t).calls.some((c) => c.startsWith('az role definition')));
});

// The decisions above fail when the script loses them: copies of the script
// with one check removed must let the bad case through.
test('the preflight tests catch a script that lost a check', (t) => {
  const text = readFileSync(script, 'utf8');
  // One level below the repository root, like scripts/, so the copy finds
  // scripts/zipdir.go as ${0%/*}/../scripts/zipdir.go.
  const dir = mkdtempSync(path.join(repoRoot, '.preflight-mutant-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const mutants = [
    ['AZ_MIN_MINOR=60', 'AZ_MIN_MINOR=50', { az: { version: '2.59.0' } }],
    ['elif [ "$AZURE_PRINCIPAL_TYPE" != "$principal_type" ]; then', 'elif false; then', { az: { userType: 'servicePrincipal' } }],
    ['for tool in az go make; do', 'for tool in az make; do', { tools: ['az', 'azd', 'make'] }],
  ];
  for (const [from, to, opts] of mutants) {
    assert.ok(text.includes(from), `azd-preflight.sh no longer contains ${from}: update this case`);
    const copy = path.join(dir, 'azd-preflight.sh');
    writeFileSync(copy, text.replace(from, to));
    const good = preflight(t, { ...opts });
    assert.equal(good.status, 1, `the real script lets ${JSON.stringify(opts)} through`);
    const bad = preflight(t, { ...opts, source: copy });
    assert.equal(bad.status, 0, `mutant (${to}) still fails: ${bad.stderr}`);
  }
});
