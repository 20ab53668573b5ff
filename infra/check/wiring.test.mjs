// Cross-file references between the Bicep files: module arguments and
// params, module outputs, and the API version of every resource. Each check
// also runs on a deliberately broken copy of one file to prove it can fail.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import { checkModuleWiring, checkApiVersions, API_VERSIONS } from './lib/wiring-rules.mjs';

const read = (rel) => readFileSync(path.join(repoRoot, rel), 'utf8');
const project = await Project.load();

test('every module argument is a param of the module, every required param is passed, every module output used exists', () => {
  assert.deepEqual(checkModuleWiring(project), []);
});

test('every resource type@apiVersion is on the allowlist, and every allowlist entry is used', () => {
  assert.deepEqual(checkApiVersions(project), []);
  assert.equal(new Set(API_VERSIONS).size, API_VERSIONS.length, 'API_VERSIONS has duplicates');
});

// [file, from, to, check, want]: replacing from with to in a copy of file
// must make check report a problem matching want.
const mutations = [
  ['infra/main.bicep', '    identityClientId: identity.outputs.clientId\n', '', checkModuleWiring,
    /module functionApp: does not pass identityClientId, which infra\/app\/functionapp\.bicep requires/],
  ['infra/main.bicep', '    deploymentContainerName: deploymentContainerName\n', '    deploymentContainer: deploymentContainerName\n', checkModuleWiring,
    /module storage: passes deploymentContainer, which infra\/app\/storage\.bicep does not declare/],
  ['infra/main.bicep', 'output AZURE_MANAGED_IDENTITY_CLIENT_ID string = identity.outputs.clientId', 'output AZURE_MANAGED_IDENTITY_CLIENT_ID string = identity.outputs.clientID', checkModuleWiring,
    /infra\/main\.bicep:\d+: identity\.outputs\.clientID: infra\/app\/identity\.bicep has no output clientID/],
  ['infra/main.bicep', "actionGroupName: '${abbrs.insightsActionGroups}${resourceToken}'", "actionGroupName: '${abbrs.insightsActionGroups}${monitoring.outputs.workspaceName}'", checkModuleWiring,
    /monitoring\.outputs\.workspaceName: infra\/app\/monitoring\.bicep has no output workspaceName/],
  ['infra/app/identity.bicep', "param location string\n", "param location string\n\nparam owner string\n", checkModuleWiring,
    /module identity: does not pass owner/],
  ['infra/app/storage.bicep', "'Microsoft.Storage/storageAccounts@2023-05-01' = {", "'Microsoft.Storage/storageAccounts@2023-05-10' = {", checkApiVersions,
    /storageAccount: Microsoft\.Storage\/storageAccounts@2023-05-10 is not on the API version allowlist/],
  ['alerts/alerts.bicep', "'Microsoft.Insights/metricAlerts@2018-03-01'", "'Microsoft.Insights/metricAlert@2018-03-01'", checkApiVersions,
    /Microsoft\.Insights\/metricAlert@2018-03-01 is not on the API version allowlist/],
  ['alerts/alerts.bicep', "resource workbook 'Microsoft.Insights/workbooks@2022-04-01'", "resource workbook 'Microsoft.Insights/workbooks@2023-06-01'", checkApiVersions,
    /allowlist entry Microsoft\.Insights\/workbooks@2022-04-01 is not used/],
  // Issue 9: GA Service Bus, and a preview version only with a reason.
  ['infra/app/servicebus.bicep', "resource orderStatusQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01'", "resource orderStatusQueue 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview'", checkApiVersions,
    /orderStatusQueue: Microsoft\.ServiceBus\/namespaces\/queues@2022-10-01-preview is not on the API version allowlist[\s\S]*orderStatusQueue: preview API version 2022-10-01-preview: use a GA version/],
  ['infra/app/servicebus.bicep', "// 2021-05-01-preview: the only version with categoryGroup (allLogs); the GA\n", '// the only version with categoryGroup (allLogs); the GA\n', checkApiVersions,
    /namespaceDiagnostics: preview API version 2021-05-01-preview: use a GA version, or say why/],
  ['infra/app/storage.bicep', '// 2021-05-01-preview: as for the blob service above (categoryGroup).\n', '// 2021-05-01-preview:\n', checkApiVersions,
    /tableDiagnostics: preview API version/],
];

for (const [rel, from, to, check, want] of mutations) {
  test(`${check.name} fails when ${rel} changes ${JSON.stringify(from.trim().split('\n')[0])}`, async () => {
    const source = read(rel);
    assert.ok(source.includes(from), `${rel} no longer contains ${JSON.stringify(from)}: update this mutation`);
    const broken = await Project.load({ [rel]: source.replace(from, to) });
    const problems = check(broken);
    assert.match(problems.join('\n'), want, `got problems:\n${problems.join('\n') || '(none)'}`);
  });
}
