// The conventions of .github/: actions pinned to commit SHAs, least-privilege
// permissions, no secrets where OIDC serves, CI running exactly the README's
// test command, the Azure workflows reading exactly the variables `azd
// pipeline config` sets, and Dependabot's coverage. Each check also runs on
// a deliberately broken copy of one file to prove it can fail.

import test from 'node:test';
import assert from 'node:assert/strict';
import {
  loadTexts, workflowPaths, parseYaml, readmeTestCommand, parameterVariables,
  checkPinnedActions, checkPermissions, checkNoSecrets, checkCi, checkAzureVariables, checkDependabot, checkScripts,
  WORKFLOW_DIR, AZD_PIPELINE_VARIABLES,
} from './lib/workflow-rules.mjs';

const texts = loadTexts();
const CI = `${WORKFLOW_DIR}/ci.yml`;
const DEV = `${WORKFLOW_DIR}/azure-dev.yml`;
const CONF = `${WORKFLOW_DIR}/azure-conformance.yml`;

test('the workflows exist and parse as YAML', () => {
  assert.deepEqual(workflowPaths(texts), [CONF, DEV, CI]);
  for (const rel of workflowPaths(texts)) assert.ok(parseYaml(rel, texts[rel]).jobs, `${rel} has no jobs`);
});

test("the README's test command is make test, read from its first code block", () => {
  assert.equal(readmeTestCommand(texts['README.md']), 'make test');
  assert.equal(readmeTestCommand('intro\n\n```sh\nmake run   # run\nmake check # every test\n```\n'), 'make check');
});

test('every Bicep parameter variable of azd, and the five azd pipeline config sets, are known', () => {
  const params = parameterVariables(texts['infra/main.parameters.json']);
  for (const v of ['AZURE_ENV_NAME', 'AZURE_LOCATION', 'AZURE_PRINCIPAL_ID', 'ALERT_EMAIL', 'RUNBOOK_BASE_URL']) assert.ok(params.includes(v), `${v} not in ${params}`);
  assert.deepEqual(AZD_PIPELINE_VARIABLES, ['AZURE_CLIENT_ID', 'AZURE_TENANT_ID', 'AZURE_SUBSCRIPTION_ID', 'AZURE_ENV_NAME', 'AZURE_LOCATION']);
});

const checks = [checkPinnedActions, checkPermissions, checkNoSecrets, checkCi, checkAzureVariables, checkDependabot, checkScripts];
for (const check of checks) {
  test(`${check.name}: no problems`, () => {
    assert.deepEqual(check(texts), []);
  });
}

const checkoutPin = 'actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1';

// [file, from, to, check, want]: replacing every `from` with `to` in a copy
// of file must make check report a problem matching want.
const mutations = [
  // Pins.
  [CI, checkoutPin, 'actions/checkout@v7', checkPinnedActions, /ci\.yml:\d+: actions\/checkout@v7 is not pinned to a full commit SHA/],
  [CI, checkoutPin, 'actions/checkout@3d3c42e5 # v7.0.1', checkPinnedActions, /not pinned to a full commit SHA/],
  [CI, checkoutPin, 'actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1', checkPinnedActions, /ci\.yml:\d+: .* has no version comment/],
  [CI, checkoutPin, 'actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # latest', checkPinnedActions, /has no version comment/],
  [DEV, checkoutPin, 'actions/checkout@de0fac2e4500dabe0009e67214ff5f5447ce83dd # v6.0.2', checkPinnedActions, /actions\/checkout pinned to de0fac2e.* but .* pins 3d3c42e5/],
  [CI, `      - name: Check out\n        uses: ${checkoutPin}\n        with:\n          persist-credentials: false\n`, '      - { name: Check out, uses: actions/checkout@v7, with: { persist-credentials: false } }\n', checkPinnedActions, /uses: in the workflow but \d+ on their own/],
  // Permissions.
  [CI, 'permissions:\n  contents: read\n', '', checkPermissions, /ci\.yml: no top-level permissions/],
  [CI, 'permissions:\n  contents: read\n', 'permissions: write-all\n', checkPermissions, /ci\.yml: top permissions is "write-all", want a mapping/],
  [CI, 'permissions:\n  contents: read\n', 'permissions:\n  contents: write\n', checkPermissions, /ci\.yml: top permissions grant contents: write/],
  [CI, 'permissions:\n  contents: read\n', 'permissions:\n  contents: read\n  id-token: write\n', checkPermissions, /ci\.yml: .*id-token: write, but the workflow does not sign in to Azure/],
  [DEV, '    runs-on: ubuntu-24.04\n', '    runs-on: ubuntu-24.04\n    permissions:\n      packages: write\n', checkPermissions, /azure-dev\.yml: job deploy permissions grant packages: write/],
  // Secrets.
  [DEV, 'client-id: ${{ vars.AZURE_CLIENT_ID }}', 'creds: ${{ secrets.AZURE_CREDENTIALS }}', checkNoSecrets, /azure-dev\.yml:\d+: reads a secret[\s\S]*client-id is undefined[\s\S]*takes creds/],
  [CONF, 'tenant-id: ${{ vars.AZURE_TENANT_ID }}', 'tenant-id: ${{ env.TENANT }}', checkNoSecrets, /azure-conformance\.yml: .*azure\/login tenant-id is "\$\{\{ env\.TENANT \}\}", want \$\{\{ vars\.AZURE_TENANT_ID \}\}/],
  [DEV, '--federated-credential-provider github', '--client-secret "$SECRET"', checkNoSecrets, /azd auth login without --federated-credential-provider github[\s\S]*with a secret/],
  // CI runs the README's command.
  [CI, 'run: make test 2>&1 | tee test.log', 'run: make test-go 2>&1 | tee test.log', checkCi, /0 steps run exactly the README's test command "make test"/],
  [CI, 'run: make test 2>&1 | tee test.log', 'run: make test || true', checkCi, /0 steps run exactly/],
  [CI, '        shell: bash\n', '', checkCi, /pipes into tee without shell: bash, so a failing "make test" would pass/],
  [CI, 'run: make test 2>&1 | tee test.log', 'run: make test 2>&1 | tee test.log | tail', checkCi, /pipes into "tee test\.log \| tail", want only tee <file>/],
  [CI, 'run: make test 2>&1 | tee test.log', 'run: make test', checkCi, /the test step's output is not written to a file the artifact keeps/],
  [CI, 'path: test.log', 'path: tests.log', checkCi, /upload-artifact keeps tests\.log, the test log is test\.log/],
  [CI, 'if: failure()', 'if: always() && false', checkCi, /no upload-artifact step that runs on failure\(\)/],
  [CI, 'go-version-file: go.mod', 'go-version: stable', checkCi, /setup-go does not take the Go version from go\.mod/],
  [CI, 'node-version: 20', 'node-version: 22', checkCi, /node-version is 22, the README asks for Node\.js 20/],
  [CI, 'cache: npm', 'cache: yarn', checkCi, /setup-node does not cache npm/],
  [CI, '  pull_request:\n', '', checkCi, /does not run on pull_request and push to main/],
  // The variables azd pipeline config sets.
  [DEV, 'AZURE_ENV_NAME: ${{ vars.AZURE_ENV_NAME }}', 'AZURE_ENV_NAME: ${{ vars.AZURE_ENVIRONMENT }}', checkAzureVariables, /reads vars\.AZURE_ENVIRONMENT, which azd pipeline config does not set[\s\S]*env AZURE_ENV_NAME is/],
  [DEV, '      ALERT_EMAIL: ${{ vars.ALERT_EMAIL }}\n', '', checkAzureVariables, /job deploy env ALERT_EMAIL is undefined/],
  [DEV, '      AZURE_LOCATION: ${{ vars.AZURE_LOCATION }}\n', '      AZURE_LOCATION: eastus2\n      AZURE_PRINCIPAL_TYPE: ServicePrincipal\n', checkAzureVariables, /env AZURE_LOCATION is "eastus2"[\s\S]*sets AZURE_PRINCIPAL_TYPE/],
  [CONF, 'vars.AZURE_CLIENT_ID', 'vars.AZURE_CLIENTID', checkAzureVariables, /azure-conformance\.yml: reads vars\.AZURE_CLIENTID/],
  // The pipeline's deployer is the conformance job's identity: no data roles.
  [DEV, "GRANT_DEPLOYER_DATA_OWNER: 'false'", 'GRANT_DEPLOYER_DATA_OWNER: ${{ vars.GRANT_DEPLOYER_DATA_OWNER }}', checkAzureVariables,
    /azure-dev\.yml: forwards vars\.GRANT_DEPLOYER_DATA_OWNER, which would give the pipeline's service principal \(the conformance job's identity\) data roles[\s\S]*env GRANT_DEPLOYER_DATA_OWNER is "\$\{\{ vars\.GRANT_DEPLOYER_DATA_OWNER \}\}", want 'false'/],
  [DEV, "GRANT_DEPLOYER_DATA_OWNER: 'false'", "GRANT_DEPLOYER_DATA_OWNER: ${{ vars.GRANT_DEPLOYER_DATA_OWNER || 'false' }}", checkAzureVariables, /forwards vars\.GRANT_DEPLOYER_DATA_OWNER/],
  [DEV, "      GRANT_DEPLOYER_DATA_OWNER: 'false'\n", '', checkAzureVariables, /env GRANT_DEPLOYER_DATA_OWNER is undefined, want 'false'/],
  [DEV, "GRANT_DEPLOYER_DATA_OWNER: 'false'", "GRANT_DEPLOYER_DATA_OWNER: 'true'", checkAzureVariables, /env GRANT_DEPLOYER_DATA_OWNER is "true", want 'false'/],
  [CONF, '      CONFORMANCE_LOG_DIR: conformance-logs\n', '      CONFORMANCE_LOG_DIR: conformance-logs\n      GRANT_DEPLOYER_DATA_OWNER: ${{ vars.GRANT_DEPLOYER_DATA_OWNER }}\n', checkAzureVariables, /azure-conformance\.yml: forwards vars\.GRANT_DEPLOYER_DATA_OWNER/],
  [DEV, 'run: azd deploy --no-prompt', 'run: azd up --no-prompt', checkAzureVariables, /does not run azd provision, then azd deploy/],
  [DEV, '  workflow_dispatch:\n', '', checkAzureVariables, /does not run on push to main and workflow_dispatch/],
  [DEV, '          go-version-file: go.mod\n', '          go-version: stable\n', checkAzureVariables, /Go is not set up from go\.mod before azd provision/],
  // Dependabot.
  ['.github/dependabot.yml', '          - github.com/Azure/*\n', '          - github.com/Azure/azure-sdk-for-go/sdk/azcore\n', checkDependabot, /no gomod group holds every Azure SDK module/],
  ['.github/dependabot.yml', '    directory: /tools\n', '    directory: /\n', checkDependabot, /no npm updates for \/tools/],
  ['.github/dependabot.yml', 'interval: weekly', 'interval: monthly', checkDependabot, /interval monthly, want weekly/],
  ['.github/dependabot.yml', '  - package-ecosystem: github-actions\n', '  - package-ecosystem: docker\n', checkDependabot, /no github-actions updates/],
  // Scripts.
  [CONF, './scripts/azure-conformance.sh tables', './scripts/azure-conformance-tables.sh', checkScripts, /runs \.\/scripts\/azure-conformance-tables\.sh, which is missing/],
];

for (const [rel, from, to, check, want] of mutations) {
  test(`${check.name} fails when ${rel} changes ${JSON.stringify(from.trim().split('\n')[0])}`, () => {
    const source = texts[rel];
    assert.ok(source.includes(from), `${rel} no longer contains ${JSON.stringify(from)}: update this mutation`);
    const broken = loadTexts({ [rel]: source.replaceAll(from, to) });
    const problems = check(broken);
    assert.match(problems.join('\n'), want, `got problems:\n${problems.join('\n') || '(none)'}`);
  });
}

test('checkCi follows the README: a different test command there fails the unchanged CI', () => {
  const readme = texts['README.md'].replace('make test   #', 'make check  #');
  assert.notEqual(readme, texts['README.md'], 'README.md changed: update this case');
  assert.match(checkCi(loadTexts({ 'README.md': readme })).join('\n'), /0 steps run exactly the README's test command "make check"/);
});

test('checkAzureVariables follows infra/main.parameters.json: a new parameter variable must reach azure-dev.yml', () => {
  const params = texts['infra/main.parameters.json'].replace('"${ALERT_EMAIL}"', '"${ALERT_EMAIL}${ALERT_SMS}"');
  assert.notEqual(params, texts['infra/main.parameters.json'], 'main.parameters.json changed: update this case');
  assert.match(checkAzureVariables(loadTexts({ 'infra/main.parameters.json': params })).join('\n'), /env ALERT_SMS is undefined/);
});
