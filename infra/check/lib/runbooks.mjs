// Reads the runbooks in alerts/runbooks/: their title, sections and code
// blocks, and the `handler <group> <sub> --flags` invocations they name.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The sections every runbook has, in this order. */
export const RUNBOOK_SECTIONS = ['Meaning', 'Impact', 'Diagnosis', 'Mitigation', 'Verification'];

/** Splits Markdown into fenced code blocks: [{lang, code, line}] (line is 1-based). */
export function codeBlocks(markdown) {
  const blocks = [];
  const lines = markdown.split('\n');
  let open = null;
  lines.forEach((line, i) => {
    const fence = /^\s*(```|~~~)\s*([\w-]*)/.exec(line);
    if (fence && !open) {
      open = { fence: fence[1], lang: fence[2], code: [], line: i + 1 };
    } else if (open && line.trim().startsWith(open.fence)) {
      blocks.push({ lang: open.lang, code: open.code.join('\n'), line: open.line });
      open = null;
    } else if (open) {
      open.code.push(line);
    }
  });
  if (open) blocks.push({ lang: open.lang, code: open.code.join('\n'), line: open.line, unterminated: true });
  return blocks;
}

/** Parses one runbook: title (first # heading), sections by ## heading, code blocks. */
export function parseRunbook(markdown) {
  const title = /^#\s+(.+?)\s*$/m.exec(markdown)?.[1] ?? null;
  const sections = new Map();
  const order = [];
  const parts = markdown.split(/^##\s+/m).slice(1);
  for (const part of parts) {
    const nl = part.indexOf('\n');
    const heading = (nl < 0 ? part : part.slice(0, nl)).trim();
    const body = nl < 0 ? '' : part.slice(nl + 1);
    order.push(heading);
    sections.set(heading, { text: body, codeBlocks: codeBlocks(body) });
  }
  return { title, order, sections, codeBlocks: codeBlocks(markdown) };
}

/** Reads every *.md in dir: [{name (file name without .md), file, text, ...parseRunbook}]. */
export function readRunbooks(dir) {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => {
      const file = path.join(dir, f);
      const text = readFileSync(file, 'utf8');
      return { name: f.slice(0, -3), file, text, ...parseRunbook(text) };
    });
}

/**
 * The `orderstatus <group> <sub> [args]` invocations in the code blocks of a
 * Markdown text, whether written orderstatus, bin/orderstatus or ./bin/orderstatus:
 * [{group, sub, flags: ['--dry-run', ...], command}]. Flags are the tokens
 * starting with --, without any =value. Shell comments, pipes and redirects
 * end a command; a trailing backslash continues it on the next line.
 */
export function handlerInvocations(markdown) {
  const found = [];
  for (const block of codeBlocks(markdown)) {
    const joined = block.code.replace(/\\\n/g, ' ');
    for (const rawLine of joined.split('\n')) {
      // A quoted placeholder ("<order id>") is one word, not a redirect.
      const line = rawLine.replace(/(^|\s)#.*$/, '').replace(/"<[^"<>]*>"/g, '"_"');
      const re = /(?:^|[\s;&|(`$])(?:\.\/)?(?:bin\/)?orderstatus\s+([a-z][\w-]*)\s+([a-z][\w-]*)([^;&|<>`)]*)/g;
      let m;
      while ((m = re.exec(line)) !== null) {
        const flags = m[3]
          .split(/\s+/)
          .filter((t) => t.startsWith('--'))
          .map((t) => t.replace(/=.*$/, ''));
        found.push({ group: m[1], sub: m[2], flags, command: m[0].trim() });
      }
    }
  }
  return found;
}

/** Collapses whitespace, for comparing a query in Bicep with the one in a runbook. */
export function squashWhitespace(s) {
  return s.replace(/\s+/g, ' ').trim();
}
