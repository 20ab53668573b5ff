#!/usr/bin/env node
// Generates azure-types.json, the compact resource schema the offline type
// check (lib/schema-rules.mjs) reads, from the type definitions the Bicep
// compiler itself compiles against: the generated/<provider>/.../types.json
// files of the public repository Azure/bicep-types-az (MIT license).
//
// It keeps exactly the resource types and API versions the templates use
// (API_VERSIONS in lib/wiring-rules.mjs) and, of each, only what a resource
// body check needs: property names, their types, enums, and the Required and
// ReadOnly flags. Types are shared across resources and deduplicated.
//
// Usage: node infra/check/schema/generate.mjs <git dir of Azure/bicep-types-az>
// (a clone or bare mirror; files are read from its HEAD commit, which is
// recorded in the output).

import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { API_VERSIONS } from '../lib/wiring-rules.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const gitDir = process.argv[2];
if (!gitDir) {
  console.error('usage: node infra/check/schema/generate.mjs <git dir of Azure/bicep-types-az>');
  process.exit(2);
}
const git = (...args) => execFileSync('git', ['--git-dir', gitDir, ...args], { encoding: 'utf8', maxBuffer: 1 << 30 });
const commit = git('rev-parse', 'HEAD').trim();
const allFiles = git('ls-tree', '-r', '--name-only', 'HEAD', 'generated').split('\n').filter((f) => f.endsWith('/types.json'));

// Bicep's property flags (bicep-types ObjectTypePropertyFlags).
const REQUIRED = 1;
const READ_ONLY = 2;

const out = { types: [], resources: {} };
const byKey = new Map();

function add(entry) {
  const key = JSON.stringify(entry);
  if (!byKey.has(key)) {
    byKey.set(key, out.types.length);
    out.types.push(entry);
  }
  return byKey.get(key);
}

// Converts type #index of one types.json (list) to a compact index in out.
// Object types may be recursive: a placeholder index is taken first.
function convert(list, ref, memo) {
  const i = Number(ref.$ref.slice(2));
  if (memo.has(i)) return memo.get(i);
  const t = list[i];
  const props = (p) => Object.fromEntries(Object.entries(p ?? {}).map(([k, v]) => {
    const flags = (v.flags & REQUIRED ? 'r' : '') + (v.flags & READ_ONLY ? 'o' : '');
    return [k, flags ? [convert(list, v.type, memo), flags] : [convert(list, v.type, memo)]];
  }));
  switch (t.$type) {
    case 'StringType': {
      const e = { t: 'string' };
      if (t.minLength !== undefined) e.minLength = t.minLength;
      if (t.maxLength !== undefined) e.maxLength = t.maxLength;
      return add(e);
    }
    case 'IntegerType': {
      const e = { t: 'int' };
      if (t.minValue !== undefined) e.min = t.minValue;
      if (t.maxValue !== undefined) e.max = t.maxValue;
      return add(e);
    }
    case 'BooleanType': return add({ t: 'bool' });
    case 'AnyType': return add({ t: 'any' });
    case 'NullType': return add({ t: 'null' });
    case 'StringLiteralType': return add({ t: 'lit', v: t.value });
    case 'ArrayType': return add({ t: 'array', item: convert(list, t.itemType, memo) });
    case 'UnionType': {
      const of = [...new Set(t.elements.map((e) => convert(list, e, memo)))].sort((a, b) => a - b);
      return add({ t: 'union', of });
    }
    case 'ObjectType':
    case 'DiscriminatedObjectType': {
      // Reserve the slot, fill it once the members are converted.
      const slot = out.types.length;
      out.types.push(null);
      memo.set(i, slot);
      const e = t.$type === 'ObjectType'
        ? { t: 'object', name: t.name, props: props(t.properties) }
        : {
          t: 'disc', name: t.name, key: t.discriminator, base: props(t.baseProperties),
          elements: Object.fromEntries(Object.entries(t.elements).map(([k, v]) => [k, convert(list, v, memo)])),
        };
      if (t.additionalProperties) e.additional = convert(list, t.additionalProperties, memo);
      out.types[slot] = e;
      return slot;
    }
    default:
      throw new Error(`unsupported type ${t.$type} at #${i}`);
  }
}

const wanted = [...new Set(API_VERSIONS)].sort();
const sources = new Set();
const cache = new Map();
for (const entry of wanted) {
  const [type, version] = entry.split('@');
  const provider = type.split('/')[0].toLowerCase();
  const candidates = allFiles.filter((f) => f.endsWith(`/${provider}/${version}/types.json`));
  let found = null;
  for (const file of candidates) {
    if (!cache.has(file)) cache.set(file, JSON.parse(git('show', `HEAD:${file}`)));
    const list = cache.get(file);
    const i = list.findIndex((t) => t.$type === 'ResourceType' && t.name.toLowerCase() === entry.toLowerCase());
    if (i >= 0) {
      found = { file, list, resource: list[i] };
      break;
    }
  }
  if (!found) throw new Error(`${entry}: not in any of ${candidates.join(', ') || '(no types.json for that provider and version)'}`);
  sources.add(found.file);
  out.resources[entry] = { body: convert(found.list, found.resource.body, new Map()), file: found.file };
}

const result = {
  $comment: 'Generated by infra/check/schema/generate.mjs; do not edit. Derived from Azure/bicep-types-az (MIT License, Copyright (c) Microsoft Corporation): the type definitions of exactly the resource types and API versions the templates use. Flags: r = required, o = read-only.',
  source: {
    repository: 'https://github.com/Azure/bicep-types-az',
    commit,
    license: 'MIT',
    files: [...sources].sort(),
  },
  resources: out.resources,
  types: out.types,
};
const file = path.join(here, 'azure-types.json');
writeFileSync(file, JSON.stringify(result) + '\n');
console.log(`wrote ${path.relative(process.cwd(), file)}: ${wanted.length} resource types, ${out.types.length} types, from ${commit}`);
