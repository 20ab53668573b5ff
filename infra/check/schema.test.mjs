// Every resource body in infra/ and alerts/ type-checked offline against the
// definitions the Bicep compiler uses (schema/azure-types.json, generated from
// Azure/bicep-types-az by schema/generate.mjs): unknown property, wrong type,
// value outside an enum, read-only property set, required property missing.
// Mutations prove each kind of problem is caught.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import { checkResourceSchemas, loadSchema } from './lib/schema-rules.mjs';
import { API_VERSIONS } from './lib/wiring-rules.mjs';

const read = (rel) => readFileSync(path.join(repoRoot, rel), 'utf8');
const project = await Project.load();
const schema = loadSchema();

test('the compact schema names its source commit and license, and covers exactly the API versions used', () => {
  assert.match(schema.source.commit, /^[0-9a-f]{40}$/);
  assert.equal(schema.source.repository, 'https://github.com/Azure/bicep-types-az');
  assert.equal(schema.source.license, 'MIT');
  assert.match(schema.$comment, /MIT License, Copyright \(c\) Microsoft Corporation/);
  assert.deepEqual(Object.keys(schema.resources).sort(), [...API_VERSIONS].sort(),
    'schema/azure-types.json is stale: run node infra/check/schema/generate.mjs <bicep-types-az git dir>');
});

test('every resource body type-checks against the schema', () => {
  assert.deepEqual(checkResourceSchemas(project, schema), []);
});

// [file, from, to, want]: each breaks one body the way a compiler would refuse.
const mutations = [
  // Misspelt property.
  ['infra/app/servicebus.bicep', 'requiresSession: true', 'requireSession: true', /orderStatusQueue .*properties: unknown property requireSession of SBQueueProperties/],
  ['infra/app/functionapp.bicep', "  properties: {\n    allow: false\n  }\n}\n\nresource scmPublishing", "  properties: {\n    allowed: false\n  }\n}\n\nresource scmPublishing", /ftpPublishing .*unknown property allowed/],
  ['infra/app/storage.bicep', "categoryGroup: 'allLogs'", "categoryGroups: 'allLogs'", /blobDiagnostics .*properties\.logs\[0\]: unknown property categoryGroups/],
  // Value outside an enum (closed, and extensible).
  ['infra/app/servicebus.bicep', "name: 'Standard'\n    tier: 'Standard'", "name: 'Standard2'\n    tier: 'Standard'", /namespace .*sku\.name: "Standard2" is not one of "Standard", "Premium", "Basic"$/m],
  ['infra/app/functionapp.bicep', "type: 'UserAssignedIdentity'", "type: 'UserAssigned'", /authentication\.type: "UserAssigned" is not one of .*"UserAssignedIdentity"/],
  ['alerts/alerts.bicep', "    timeAggregation: 'Total'\n    windowSize: 'PT5M'\n  }\n  {\n    name: 'service-bus-throttled-requests'", "    timeAggregation: 'Sum'\n    windowSize: 'PT5M'\n  }\n  {\n    name: 'service-bus-throttled-requests'", /metricAlertRules .*criteria\.allOf\[0\]\.timeAggregation: "Sum" is not one of/],
  // Wrong type, literal and through a param's declared type.
  ['infra/app/servicebus.bicep', 'maxDeliveryCount: 5', "maxDeliveryCount: '5'", /properties\.maxDeliveryCount: "5" is string, want int/],
  ['infra/app/functionapp.bicep', 'instanceMemoryMB: instanceMemoryMB', 'instanceMemoryMB: logLevel', /instanceMemoryMB: logLevel is string, want int/],
  ['infra/app/monitoring.bicep', 'disableLocalAuth: true', "disableLocalAuth: 'true'", /features\.disableLocalAuth: "true" is string, want bool/],
  // Read-only property set.
  ['infra/app/servicebus.bicep', 'disableLocalAuth: true', "disableLocalAuth: true\n    provisioningState: 'Succeeded'", /namespace .*properties\.provisioningState is read-only/],
  // The activity-log alert (Resource Health): a leaf condition misspelt.
  ['alerts/alerts.bicep', "field: 'category'", "fields: 'category'", /resourceHealthAlert .*unknown property fields/],
  // Required property missing.
  ['alerts/alerts.bicep', "    groupShortName: 'orderstatus'\n", '', /actionGroup .*required property properties\.groupShortName is missing/],
];

for (const [rel, from, to, want] of mutations) {
  test(`the type check fails when ${rel} changes ${JSON.stringify(from.trim().split('\n')[0])} to ${JSON.stringify(to.trim().split('\n')[0])}`, async () => {
    const source = read(rel);
    assert.ok(source.includes(from), `${rel} no longer contains ${JSON.stringify(from)}: update this mutation`);
    const broken = await Project.load({ [rel]: source.replace(from, to) });
    const problems = checkResourceSchemas(broken, schema);
    assert.match(problems.join('\n'), want, `got problems:\n${problems.join('\n') || '(none)'}`);
  });
}

test('a type@version missing from the schema is reported', async () => {
  const rel = 'infra/app/identity.bicep';
  const broken = await Project.load({ [rel]: read(rel).replace('@2023-01-31', '@2024-11-30') });
  assert.match(checkResourceSchemas(broken, schema).join('\n'), /userAssignedIdentities@2024-11-30\): not in the compact schema/);
});
