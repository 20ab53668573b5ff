// Cross-file references that only a Bicep compiler would otherwise catch:
// the arguments of each module call against the module's params, every
// `<module>.outputs.<name>` against the module's outputs, and every resource
// type@apiVersion against the versions this project uses. Each check takes a
// loaded Project and returns a list of problems, empty when all is well.

import path from 'node:path';
import { isPlainObject } from './bicep.mjs';

/**
 * Every resource type@apiVersion the templates use, existing references
 * included. Each pair is in Azure/bicep-types-az (see the compact schema,
 * infra/check/schema/azure-types.json); a version not listed here is a typo
 * until someone checks that Azure publishes it and adds it. An entry nothing
 * uses is stale. Preview versions are refused unless the declaration says why
 * (checkApiVersions).
 */
export const API_VERSIONS = [
  'Microsoft.Authorization/roleAssignments@2022-04-01',
  'Microsoft.Insights/actionGroups@2023-01-01',
  'Microsoft.Insights/activityLogAlerts@2020-10-01',
  'Microsoft.Insights/components@2020-02-02',
  'Microsoft.Insights/diagnosticSettings@2021-05-01-preview',
  'Microsoft.Insights/metricAlerts@2018-03-01',
  'Microsoft.Insights/scheduledQueryRules@2022-06-15',
  'Microsoft.Insights/workbooks@2022-04-01',
  'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31',
  'Microsoft.OperationalInsights/workspaces@2023-09-01',
  'Microsoft.Resources/resourceGroups@2021-04-01',
  'Microsoft.ServiceBus/namespaces@2024-01-01',
  'Microsoft.ServiceBus/namespaces/queues@2024-01-01',
  'Microsoft.Storage/storageAccounts@2023-05-01',
  'Microsoft.Storage/storageAccounts/blobServices@2023-05-01',
  'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01',
  'Microsoft.Storage/storageAccounts/tableServices@2023-05-01',
  'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01',
  'Microsoft.Web/serverfarms@2024-04-01',
  'Microsoft.Web/sites@2024-04-01',
  'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01',
  'Microsoft.Web/sites/config@2024-04-01',
];

// The file a module call in file refers to.
function moduleFile(project, file, mod) {
  return project.get(path.join(path.dirname(file.rel), mod.path));
}

// Calls visit(node) for every node of the tree (comments and string
// contents are leaves, so text in them is never mistaken for code).
function walk(node, visit) {
  visit(node);
  for (const child of node.namedChildren) walk(child, visit);
}

/**
 * Module calls against the modules they call: every argument is a declared
 * param of the module, every param without a default is passed, and every
 * `<module>.outputs.<name>` names an output the module declares.
 */
export function checkModuleWiring(project) {
  const problems = [];
  for (const file of project.all()) {
    for (const mod of file.modules) {
      const where = `${file.rel} module ${mod.symbol}`;
      const target = moduleFile(project, file, mod);
      const args = mod.body.params ?? {};
      if (!isPlainObject(args)) {
        problems.push(`${where}: params must be a literal object so each argument can be checked`);
        continue;
      }
      for (const key of Object.keys(args)) {
        if (!target.params.has(key)) problems.push(`${where}: passes ${key}, which ${target.rel} does not declare as a param`);
      }
      for (const [name, param] of target.params) {
        if (param.defaultNode === null && !(name in args)) {
          problems.push(`${where}: does not pass ${name}, which ${target.rel} requires (no default)`);
        }
      }
    }

    walk(file.tree.rootNode, (node) => {
      if (node.type !== 'member_expression') return;
      const object = node.childForFieldName('object');
      if (object?.type !== 'member_expression' || object.childForFieldName('property')?.text !== 'outputs') return;
      const symbol = object.childForFieldName('object');
      const mod = symbol?.type === 'identifier' ? file.module(symbol.text) : undefined;
      if (!mod) return;
      const name = node.childForFieldName('property').text;
      const target = moduleFile(project, file, mod);
      if (!target.outputs.has(name)) {
        problems.push(`${file.rel}:${node.startPosition.row + 1}: ${node.text}: ${target.rel} has no output ${name}`);
      }
    });
  }
  return problems;
}

/**
 * The comment lines directly above the declaration of resource symbol in a
 * file's source (decorators skipped), joined with spaces; '' when none.
 */
export function commentAbove(source, symbol) {
  const lines = source.split('\n');
  const at = lines.findIndex((l) => new RegExp(`^\\s*resource\\s+${symbol}\\s+'`).test(l));
  if (at < 0) return '';
  const out = [];
  for (let i = at - 1; i >= 0; i--) {
    const line = lines[i].trim();
    if (line.startsWith('@')) continue;
    if (!line.startsWith('//')) break;
    out.unshift(line.replace(/^\/\/\s?/, ''));
  }
  return out.join(' ');
}

/**
 * Every resource declaration's type@apiVersion against allowed (compared
 * case-insensitively for the type, as Azure does, and exactly for the
 * version), and every allowed entry against what is used. A preview version
 * (a GA version may drop or change what a preview has, and previews are
 * retired) is refused unless the comment above the declaration names the
 * version followed by a colon and the reason, e.g.
 * `// 2021-05-01-preview: the only version with categoryGroup`.
 */
export function checkApiVersions(project, allowed = API_VERSIONS) {
  const problems = [];
  const key = (type, version) => `${type.toLowerCase()}@${version}`;
  const allowedKeys = new Map(allowed.map((a) => {
    const [type, version] = a.split('@');
    return [key(type, version), a];
  }));
  const used = new Set();
  for (const file of project.all()) {
    for (const r of file.resources) {
      const k = key(r.type, r.apiVersion);
      used.add(k);
      if (!allowedKeys.has(k)) {
        problems.push(`${file.rel} resource ${r.symbol}: ${r.type}@${r.apiVersion} is not on the API version allowlist (a typo, or check that Azure publishes it and add it)`);
      }
      if (/-preview$/i.test(r.apiVersion ?? '')) {
        const why = new RegExp(`${r.apiVersion}:\\s*(\\S+\\s+){3,}`).test(commentAbove(file.source, r.symbol));
        if (!why) {
          problems.push(`${file.rel} resource ${r.symbol}: preview API version ${r.apiVersion}: use a GA version, or say why in a comment above it ("// ${r.apiVersion}: <why no GA version will do>")`);
        }
      }
    }
  }
  for (const [k, entry] of allowedKeys) {
    if (!used.has(k)) problems.push(`API version allowlist entry ${entry} is not used by any template: remove it`);
  }
  return problems;
}
