// Syntax gate for every Bicep and JSON file under infra/ and alerts/.
//
// No Bicep compiler installs from the registries reachable here, so every
// .bicep file is parsed with the tree-sitter-bicep grammar (WASM, through
// web-tree-sitter) and must produce zero ERROR and zero MISSING nodes. The
// broken fixtures below prove the gate can fail. This is syntax only: types,
// resource schemas and API versions are checked by `bicep build`, which azd
// runs before provisioning.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseBicep, syntaxErrors, repoRoot, readBicep } from './lib/bicep.mjs';

function filesUnder(dir, ext) {
  const out = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p, ext));
    else if (name.endsWith(ext)) out.push(p);
  }
  return out.sort();
}

const roots = ['infra', 'alerts'].map((d) => path.join(repoRoot, d));
const bicepFiles = roots.flatMap((d) => filesUnder(d, '.bicep'));
const rel = (p) => path.relative(repoRoot, p);

test('the Bicep files are found', () => {
  const names = bicepFiles.map(rel);
  for (const want of ['infra/main.bicep', 'alerts/alerts.bicep']) {
    assert.ok(names.includes(want), `got ${names.join(', ')}, want ${want} among them`);
  }
});

test('every .bicep file parses without ERROR or MISSING nodes', async (t) => {
  for (const file of bicepFiles) {
    await t.test(rel(file), async () => {
      const tree = await parseBicep(readFileSync(file, 'utf8'));
      const errors = syntaxErrors(tree);
      assert.deepEqual(errors, [], `${rel(file)}: ${errors.map((e) => `${e.kind} at ${e.line}:${e.column} ${e.text}`).join('; ')}`);
    });
  }
});

test('no Bicep file uses syntax the grammar does not know', () => {
  // tree-sitter-bicep 1.1.0 does not understand these; a file using them could
  // be misread rather than rejected, so they are kept out.
  const unsupported = [
    [/^\s*extension\s/m, 'extension'],
    [/\.\.\.\s*[A-Za-z_(]/, 'spread (...)'],
    [/resourceInput</, 'resourceInput<>'],
    [/^\s*(param|type)\s+\w+\s+[\w.]+\?\s*$/m, 'nullable type'],
  ];
  for (const file of bicepFiles) {
    const text = readFileSync(file, 'utf8').replace(/'''[\s\S]*?'''/g, "''").replace(/\/\/.*$/gm, '');
    for (const [re, what] of unsupported) {
      assert.doesNotMatch(text, re, `${rel(file)} uses ${what}`);
    }
  }
});

// Each fixture is broken in one way the gate must notice.
const broken = {
  'unclosed object': "resource q 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' = {\n  name: 'order-status'\n",
  'unterminated string': "param name string = 'order-status\noutput x string = name\n",
  'doubled equals': 'var x = = 1\n',
  'missing value': 'param maxDeliveryCount int =\n',
  'unclosed decorator': "@description('x'\nparam p string\n",
  'property without colon': "var o = {\n  lockDuration 'PT1M'\n}\n",
  'unclosed array': 'var tables = [\n  \'orderstatus\'\n',
};

for (const [name, source] of Object.entries(broken)) {
  test(`the syntax gate rejects a broken fixture: ${name}`, async () => {
    const errors = syntaxErrors(await parseBicep(source));
    assert.ok(errors.length > 0, `got no ERROR or MISSING node for:\n${source}`);
    assert.ok(errors.every((e) => e.line >= 1 && e.column >= 1), `got positions ${JSON.stringify(errors)}`);
  });
}

test('the syntax gate rejects main.bicep with one closing brace removed', async () => {
  const source = readFileSync(path.join(repoRoot, 'infra/main.bicep'), 'utf8');
  const at = source.lastIndexOf('\n}\n');
  assert.ok(at > 0, 'main.bicep has no top-level closing brace to remove');
  const damaged = source.slice(0, at) + '\n' + source.slice(at + 3);
  const errors = syntaxErrors(await parseBicep(damaged));
  assert.ok(errors.length > 0, 'got no error for main.bicep without a closing brace');
});

test('the syntax gate accepts the constructs the templates use', async () => {
  const source = `targetScope = 'subscription'
@description('d')
@allowed([
  512
  2048
])
param memory int = 2048
var names = [
  'a'
  'b'
]
var esc = 'cost: \\$5, it\\'s \\\\ \${memory}'
var q = '''
traces
| extend line = extract(@"(\\{.*\\})", 1, message)
'''
resource r 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [for (n, i) in names: {
  name: n
}]
resource a 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (n, i) in names: if (memory > 0 && !empty(n)) {
  name: guid(r[i].id, n)
  scope: r[i]
  properties: {
    principalType: 'ServicePrincipal'
  }
}]
output all array = map(names, x => '\${x}-\${memory}')
resource early 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' = {
  name: lateName
}
var lateName = 'declared-after-use'
`;
  const file = await readBicep('fixture.bicep', source);
  assert.deepEqual(file.errors, []);
  assert.equal(file.targetScope, 'subscription');
  assert.deepEqual(file.paramDefault('memory'), 2048);
  assert.deepEqual(file.params.get('memory').decorators.allowed, [[512, 2048]]);
  assert.match(file.variable('q'), /extract\(@"\(\\\{\.\*\\\}\)", 1, message\)/);
  assert.equal(file.variable('esc').pattern, "cost: $5, it's \\ ${memory}");
  const a = file.resource('a');
  assert.equal(a.loop.index, 'i');
  assert.deepEqual(a.loop.iterable, ['a', 'b']);
  assert.equal(a.condition.text, '(memory > 0 && !empty(n))');
  assert.equal(a.body.scope.ref.name, 'r');
  assert.equal(file.resource('early').body.name, 'declared-after-use');
});

test('every JSON file parses', () => {
  const files = [
    ...roots.flatMap((d) => filesUnder(d, '.json')),
    path.join(repoRoot, 'local.settings.json.template'),
  ];
  assert.ok(files.some((f) => rel(f) === 'infra/main.parameters.json'), 'infra/main.parameters.json is missing');
  assert.ok(files.some((f) => rel(f) === 'alerts/workbook.json'), 'alerts/workbook.json is missing');
  for (const file of files) {
    assert.doesNotThrow(() => JSON.parse(readFileSync(file, 'utf8')), `${rel(file)} is not valid JSON`);
  }
});
