// A terse reporter for `node --test`: nothing for a passing test, the name
// (with its parents) and the error of every failing one, and one closing
// line, `infra: N passed, M failed, K skipped`. Suites (describe, and a
// test with subtests) are not counted, their leaf tests are; a file that
// fails to load counts as one failure under its name. `make test` uses it
// and keeps the spec reporter's full output in a log file.
//
//   node --test --test-reporter=./infra/check/lib/terse-reporter.mjs infra/check/

import { inspect } from 'node:util';

export default async function* terseReporter(source) {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  // The names of the tests running, by nesting level, for full names.
  const stack = [];
  // What each test file wrote to stderr: shown when the file itself fails
  // (it would not load, or exited early).
  const stderr = new Map();
  for await (const event of source) {
    const { type, data } = event;
    if (type === 'test:stderr') {
      stderr.set(data.file, (stderr.get(data.file) ?? '') + data.message);
      continue;
    }
    if (type === 'test:start') {
      stack[data.nesting] = data.name;
      stack.length = data.nesting + 1;
      continue;
    }
    if (type !== 'test:pass' && type !== 'test:fail') {
      continue;
    }
    const details = data.details ?? {};
    if (details.type === 'suite') {
      // A suite fails through its tests, unless it failed on its own
      // (a hook, or a file that would not load).
      if (type === 'test:fail' && !isSubtestsFailure(details.error)) {
        failed++;
        yield failure(data, stack, stderr);
      }
      continue;
    }
    if (data.skip !== undefined || data.todo !== undefined) {
      skipped++;
    } else if (type === 'test:pass') {
      passed++;
    } else if (isSubtestsFailure(details.error)) {
      // A test whose subtests failed: they are reported themselves.
    } else {
      failed++;
      yield failure(data, stack, stderr);
    }
  }
  yield `infra: ${passed} passed, ${failed} failed, ${skipped} skipped\n`;
}

/** isSubtestsFailure: the error only says that subtests failed. */
function isSubtestsFailure(error) {
  return error?.failureType === 'subtestsFailed';
}

function failure(data, stack, stderr) {
  const names = [...stack.slice(0, data.nesting), data.name].filter(Boolean);
  const where = data.file ? ` (${data.file}${data.line ? `:${data.line}` : ''})` : '';
  const err = data.details?.error;
  const cause = err?.cause ?? err;
  let text = cause instanceof Error ? (cause.stack ?? cause.message) : inspect(cause, { depth: 4 });
  if (!(cause instanceof Error) && data.name === data.file && stderr.get(data.file)) {
    text += `\n${stderr.get(data.file)}`; // the file failed as a whole: say why
  }
  const lines = String(text).split('\n')
    .filter((l) => !/\((node:internal|node:async_hooks)/.test(l) && l.trim() !== '');
  return `not ok: ${names.join(' > ')}${where}\n${lines.map((l) => `    ${l}`).join('\n')}\n`;
}
