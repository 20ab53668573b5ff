// One default per knob (issue 30.4): docs/deploy.md's parameter table,
// infra/main.bicep, infra/main.parameters.json, the modules, and the
// handler's own defaults in handler/internal/config/config.go agree. Each
// check also runs on a copy with one default changed, to prove it fails.

import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './lib/bicep.mjs';
import { Project } from './lib/project.mjs';
import {
  checkDeployDefaults, checkModuleDefaults, checkGoDefaults, goDefault, goDurationSeconds, deployParameterRows, DESCRIBED_DEFAULTS,
} from './lib/defaults-rules.mjs';

const read = (rel) => readFileSync(path.join(repoRoot, rel), 'utf8');
const deployMd = read('docs/deploy.md');
const parametersJson = read('infra/main.parameters.json');
const configGo = read('handler/internal/config/config.go');
const project = await Project.load();
const files = { deployMd, parametersJson };

test('docs/deploy.md gives every parameter of main.bicep, with the default main.bicep and azd use', () => {
  assert.deepEqual(checkDeployDefaults(project, files), []);
  const rows = deployParameterRows(deployMd).map((r) => r.param);
  for (const name of ['orderStatusRetryBudget', 'maximumInstanceCount', 'operatorPrincipalId', 'scheduledMessagesThreshold']) assert.ok(rows.includes(name), `no row for ${name}`);
  for (const [name, [, why]] of Object.entries(DESCRIBED_DEFAULTS)) assert.ok(why.length > 20, `${name} needs a reason`);
});

test('the module parameters main.bicep passes its own to default alike', () => {
  assert.deepEqual(checkModuleDefaults(project), []);
});

test('a parameter that becomes a setting the handler reads defaults as the handler does', () => {
  const { problems, pairs } = checkGoDefaults(project, configGo);
  assert.deepEqual(problems, []);
  for (const s of ['ORDER_STATUS_RETRY_BUDGET', 'DEAD_LETTER_SWEEP_SCHEDULE', 'LOG_LEVEL']) assert.ok(pairs.includes(s), `${s} not compared; found ${pairs}`);
});

test('config.go defaults are read from its text', () => {
  assert.deepEqual(goDefault(configGo, 'EnvRetryBudget'), { duration: 5 });
  assert.deepEqual(goDefault(configGo, 'EnvDeadLetterSweepSchedule'), { value: '0 */5 * * * *' });
  assert.deepEqual(goDefault(configGo, 'EnvLogLevel'), { value: 'info' });
  assert.deepEqual(goDefault(configGo, 'EnvQueue'), { value: 'order-status' });
  assert.deepEqual([goDurationSeconds('5s'), goDurationSeconds('10m'), goDurationSeconds('1h30m'), goDurationSeconds('5')], [5, 600, 5400, NaN]);
});

test('the default checks fail when any one pair differs', async () => {
  const docCases = [
    // The finding of issue 30.4: the docs said 20s while the Bicep said 5s.
    ['| `orderStatusRetryBudget` | | `5s` |', '| `orderStatusRetryBudget` | | `20s` |', /docs\/deploy\.md orderStatusRetryBudget: default 20s, infra\/main\.bicep 5s/],
    ['| `instanceMemoryMB` | `FUNCTION_INSTANCE_MEMORY_MB` | `512` |', '| `instanceMemoryMB` | `FUNCTION_INSTANCE_MEMORY_MB` | `2048` |', /instanceMemoryMB: default 2048, infra\/main\.bicep 512/],
    ['| `grantDeployerDataOwner` | `GRANT_DEPLOYER_DATA_OWNER` |', '| `grantDeployerDataOwner` | `GRANT_DEPLOYER_OWNER` |', /grantDeployerDataOwner: azd variable GRANT_DEPLOYER_OWNER, main\.parameters\.json maps GRANT_DEPLOYER_DATA_OWNER/],
    ['| `alertEmail` | `ALERT_EMAIL` | empty |', '| `alertEmail` | `ALERT_EMAIL` | ops |', /alertEmail: default "ops" gives no value/],
    ['| `scheduledMessagesThreshold` |', '| `scheduledMessageThreshold` |', /names the parameter scheduledMessageThreshold[\s\S]*no row for scheduledMessagesThreshold/],
  ];
  for (const [from, to, want] of docCases) {
    assert.ok(deployMd.includes(from), `docs/deploy.md no longer contains ${JSON.stringify(from)}: update this case`);
    assert.match(checkDeployDefaults(project, { ...files, deployMd: deployMd.replace(from, to) }).join('\n'), want);
  }
  const bicepCases = [
    ['infra/main.bicep', "param orderStatusRetryBudget string = '5s'", "param orderStatusRetryBudget string = '20s'", /orderStatusRetryBudget: default 5s, infra\/main\.bicep 20s/],
    ['infra/main.bicep', 'param backlogThreshold int = 100', 'param backlogThreshold int = 50', /backlogThreshold: default 100, infra\/main\.bicep 50/],
  ];
  for (const [rel, from, to, want] of bicepCases) {
    assert.ok(read(rel).includes(from), `${rel} no longer contains ${JSON.stringify(from)}: update this case`);
    const p = await Project.load({ [rel]: read(rel).replace(from, to) });
    assert.match(checkDeployDefaults(p, files).join('\n'), want);
  }
  assert.match(checkDeployDefaults(project, { ...files, parametersJson: parametersJson.replace('${FUNCTION_MAXIMUM_INSTANCE_COUNT=40}', '${FUNCTION_MAXIMUM_INSTANCE_COUNT=100}') }).join('\n'),
    /main\.parameters\.json maximumInstanceCount: azd default 100, infra\/main\.bicep default 40/);

  const moduleCases = [
    ['infra/app/functionapp.bicep', "param orderStatusRetryBudget string = '5s'", "param orderStatusRetryBudget string = '20s'", /functionapp\.bicep param orderStatusRetryBudget defaults to "20s", infra\/main\.bicep passes orderStatusRetryBudget, which defaults to "5s"/],
    ['alerts/alerts.bicep', 'param scheduledMessagesThreshold int = 500', 'param scheduledMessagesThreshold int = 1000', /alerts\.bicep param scheduledMessagesThreshold defaults to 1000/],
  ];
  for (const [rel, from, to, want] of moduleCases) {
    assert.ok(read(rel).includes(from), `${rel} no longer contains ${JSON.stringify(from)}: update this case`);
    const p = await Project.load({ [rel]: read(rel).replace(from, to) });
    assert.match(checkModuleDefaults(p).join('\n'), want);
  }

  // The handler's default moves: the Bicep no longer says what the app runs with when unset.
  const budget = configGo.replace(/(DefaultRetryBudget\s*=\s*)5 \* time\.Second/, '$120 * time.Second');
  assert.notEqual(budget, configGo, 'config.go no longer declares DefaultRetryBudget = 5 * time.Second: update this case');
  assert.match(checkGoDefaults(project, budget).problems.join('\n'), /ORDER_STATUS_RETRY_BUDGET: infra\/main\.bicep param orderStatusRetryBudget defaults to 5s, handler\/internal\/config\/config\.go to 20s/);
  const level = configGo.replace('c.LogLevel = slog.LevelInfo', 'c.LogLevel = slog.LevelWarn');
  assert.match(checkGoDefaults(project, level).problems.join('\n'), /LOG_LEVEL: .* defaults to info, .*config\.go to warn/);
  const schedule = configGo.replace('DefaultDeadLetterSweepSchedule = "0 */5 * * * *"', 'DefaultDeadLetterSweepSchedule = "0 */1 * * * *"');
  assert.match(checkGoDefaults(project, schedule).problems.join('\n'), /DEAD_LETTER_SWEEP_SCHEDULE: .*config\.go to 0 \*\/1 \* \* \* \*/);
});
