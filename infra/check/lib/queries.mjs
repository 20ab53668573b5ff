// Every KQL query the system runs or tells people to run: the log alerts',
// the workbook's, and the kql blocks of the runbooks, alerts/README.md and
// docs/observability.md.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './bicep.mjs';
import { logAlertQueries } from './alert-rules.mjs';
import { readRunbooks, codeBlocks } from './runbooks.mjs';

const read = (rel) => readFileSync(path.join(repoRoot, rel), 'utf8');

/** [where, query] for every query of the project p (a Project). */
export function allQueries(p) {
  const out = [];
  for (const [name, q] of Object.entries(logAlertQueries(p))) out.push([`alert ${name}`, q]);
  const wb = JSON.parse(read('alerts/workbook.json'));
  for (const item of wb.items.filter((i) => i.type === 3)) out.push([`workbook ${item.name}`, item.content.query]);
  for (const book of readRunbooks(path.join(repoRoot, 'alerts/runbooks'))) {
    for (const b of book.codeBlocks.filter((c) => c.lang === 'kql')) out.push([`alerts/runbooks/${book.name}.md:${b.line}`, b.code]);
  }
  for (const b of codeBlocks(read('alerts/README.md')).filter((c) => c.lang === 'kql')) out.push([`alerts/README.md:${b.line}`, b.code]);
  for (const b of codeBlocks(read('docs/observability.md')).filter((c) => c.lang === 'kql')) out.push([`docs/observability.md:${b.line}`, b.code]);
  return out;
}
