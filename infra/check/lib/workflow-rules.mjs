// The conventions of the GitHub workflows and Dependabot configuration in
// .github/, checked offline. Every check takes the repository's texts as a
// map of repository-relative path to source (so a test can hand it a
// deliberately broken copy) and returns a list of problems, empty when all
// is well. actionlint (make lint-workflows) checks the workflow syntax,
// expressions and run: scripts; these checks hold what it cannot know: this
// project's rules.

import { createRequire } from 'node:module';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './bicep.mjs';

const requireTools = createRequire(path.join(repoRoot, 'tools', 'package.json'));
const YAML = requireTools('yaml');

export const WORKFLOW_DIR = '.github/workflows';
export const DEPENDABOT = '.github/dependabot.yml';

/**
 * The repository variables `azd pipeline config` sets for a GitHub
 * repository with federated credentials (azd's GitHub provider,
 * setPipelineVariables), whatever the project.
 */
export const AZD_PIPELINE_VARIABLES = ['AZURE_CLIENT_ID', 'AZURE_TENANT_ID', 'AZURE_SUBSCRIPTION_ID', 'AZURE_ENV_NAME', 'AZURE_LOCATION'];

/**
 * Variables of infra/main.parameters.json that azd substitutes itself with
 * the signed-in principal (so the pipeline must not pass them).
 */
export const AZD_PRINCIPAL_VARIABLES = ['AZURE_PRINCIPAL_ID', 'AZURE_PRINCIPAL_TYPE'];

/**
 * Variables of infra/main.parameters.json that the pipeline must not take
 * from the repository variables, with the value azure-dev.yml sets instead.
 * GRANT_DEPLOYER_DATA_OWNER gives the deployer data roles on the app's
 * tables and queues; in the pipeline the deployer is the service principal
 * the conformance job also signs in as, which must never hold one.
 */
export const PIPELINE_FIXED_VARIABLES = { GRANT_DEPLOYER_DATA_OWNER: 'false' };

/** Reads every file the checks look at; overrides replace texts by path. */
export function loadTexts(overrides = {}) {
  const texts = {};
  const read = (rel) => {
    texts[rel] = overrides[rel] ?? readFileSync(path.join(repoRoot, rel), 'utf8');
  };
  for (const f of readdirSync(path.join(repoRoot, WORKFLOW_DIR)).sort()) {
    if (/\.ya?ml$/.test(f)) read(`${WORKFLOW_DIR}/${f}`);
  }
  for (const rel of [DEPENDABOT, 'README.md', 'go.mod', 'infra/main.parameters.json']) read(rel);
  return { ...texts, ...overrides };
}

/** The workflow paths among texts. */
export function workflowPaths(texts) {
  return Object.keys(texts).filter((rel) => rel.startsWith(`${WORKFLOW_DIR}/`) && /\.ya?ml$/.test(rel)).sort();
}

/** Parses YAML strictly (any error or warning throws, naming the file). */
export function parseYaml(rel, text) {
  const doc = YAML.parseDocument(text, { prettyErrors: true, strict: true, uniqueKeys: true });
  const errors = [...doc.errors, ...doc.warnings];
  if (errors.length) throw new Error(`${rel}: ${errors.map((e) => e.message).join('; ')}`);
  return doc.toJS();
}

/** [{job, index, step}] for every step of every job of a parsed workflow. */
function steps(wf) {
  return Object.entries(wf.jobs ?? {}).flatMap(([job, j]) => (j.steps ?? []).map((step, index) => ({ job, index, step })));
}

/** The action a step uses, without its ref ("actions/checkout"), or null. */
function actionOf(step) {
  return typeof step.uses === 'string' ? step.uses.split('@')[0].toLowerCase() : null;
}

// A uses: line: the reference, then an optional comment.
const USES_LINE = /^\s*(?:-\s+)?uses:\s*(['"]?)([^\s'"#]+)\1\s*(?:#\s*(.*?))?\s*$/;
const SHA = /^[0-9a-f]{40}$/;
const VERSION_COMMENT = /^v\d+(\.\d+){0,2}$/;

/**
 * Every action a workflow uses is pinned to a full 40-hex commit SHA with its
 * version in a comment (`uses: owner/repo@<sha> # v1.2.3`), and one action
 * is pinned to one SHA and version across all workflows. Local actions
 * (./path) are the repository's own and need no pin.
 */
export function checkPinnedActions(texts) {
  const problems = [];
  const pins = new Map();
  for (const rel of workflowPaths(texts)) {
    const text = texts[rel];
    const lines = text.split('\n');
    const usesLines = lines.map((line, i) => ({ m: USES_LINE.exec(line), n: i + 1 })).filter(({ m }) => m);
    const parsedUses = steps(parseYaml(rel, text)).filter(({ step }) => step.uses !== undefined).length +
      Object.values(parseYaml(rel, text).jobs ?? {}).filter((j) => j.uses !== undefined).length;
    if (parsedUses !== usesLines.length) {
      problems.push(`${rel}: ${parsedUses} uses: in the workflow but ${usesLines.length} on their own "uses: ref # version" lines`);
    }
    for (const { m, n } of usesLines) {
      const [, , ref, comment] = m;
      if (ref.startsWith('./')) continue;
      const at = ref.lastIndexOf('@');
      const [action, sha] = at < 0 ? [ref, ''] : [ref.slice(0, at), ref.slice(at + 1)];
      if (!SHA.test(sha)) {
        problems.push(`${rel}:${n}: ${ref} is not pinned to a full commit SHA`);
        continue;
      }
      if (!comment || !VERSION_COMMENT.test(comment)) {
        problems.push(`${rel}:${n}: ${ref} has no version comment (want "# vX.Y.Z")`);
        continue;
      }
      const key = action.toLowerCase();
      const pin = `${sha} # ${comment}`;
      const seen = pins.get(key);
      if (seen && seen.pin !== pin) {
        problems.push(`${rel}:${n}: ${action} pinned to ${pin}, but ${seen.where} pins ${seen.pin}`);
      } else if (!seen) {
        pins.set(key, { pin, where: `${rel}:${n}` });
      }
    }
  }
  return problems;
}

// What a workflow may be granted: reading the code, and an OIDC token where
// it signs in to Azure. Nothing else is ever written.
const ALLOWED_WRITE = new Set(['id-token']);

/** Whether a parsed workflow signs in to Azure (azure/login or azd auth login). */
function signsInToAzure(wf) {
  return steps(wf).some(({ step }) => actionOf(step) === 'azure/login' || /\bazd auth login\b/.test(step.run ?? ''));
}

/**
 * `permissions:` is set at the top of every workflow as a mapping of scopes;
 * no scope is write except `id-token`, and that only where the workflow signs
 * in to Azure. Job-level permissions obey the same rule.
 */
export function checkPermissions(texts) {
  const problems = [];
  for (const rel of workflowPaths(texts)) {
    const wf = parseYaml(rel, texts[rel]);
    const oidc = signsInToAzure(wf);
    const blocks = [['top', wf.permissions]];
    for (const [name, job] of Object.entries(wf.jobs ?? {})) {
      if (job.permissions !== undefined) blocks.push([`job ${name}`, job.permissions]);
    }
    if (wf.permissions === undefined) {
      problems.push(`${rel}: no top-level permissions: (the default token may write)`);
      continue;
    }
    for (const [where, perms] of blocks) {
      if (perms === null || typeof perms !== 'object' || Array.isArray(perms)) {
        problems.push(`${rel}: ${where} permissions is ${JSON.stringify(perms)}, want a mapping of scopes`);
        continue;
      }
      for (const [scope, level] of Object.entries(perms)) {
        if (level === 'write' && !ALLOWED_WRITE.has(scope)) problems.push(`${rel}: ${where} permissions grant ${scope}: write`);
        if (scope === 'id-token' && level === 'write' && !oidc) {
          problems.push(`${rel}: ${where} permissions grant id-token: write, but the workflow does not sign in to Azure`);
        }
      }
    }
  }
  return problems;
}

/** The azure/login inputs that federated sign-in takes, each from the variable azd pipeline config sets. */
const LOGIN_INPUTS = { 'client-id': 'AZURE_CLIENT_ID', 'tenant-id': 'AZURE_TENANT_ID', 'subscription-id': 'AZURE_SUBSCRIPTION_ID' };

/**
 * No workflow reads a secret: Azure sign-in is OIDC with a federated
 * credential, so azure/login takes client-id, tenant-id and subscription-id
 * from repository variables (vars.*) and no creds; azd signs in with
 * --federated-credential-provider github and never a client secret.
 */
export function checkNoSecrets(texts) {
  const problems = [];
  for (const rel of workflowPaths(texts)) {
    const text = texts[rel];
    text.split('\n').forEach((line, i) => {
      if (/\bsecrets\s*\.|\bsecrets\s*\[/.test(line.replace(/#.*$/, ''))) problems.push(`${rel}:${i + 1}: reads a secret (${line.trim()}); sign in with OIDC instead`);
    });
    for (const { job, index, step } of steps(parseYaml(rel, text))) {
      const where = `${rel}: job ${job} step ${index + 1}`;
      if (actionOf(step) === 'azure/login') {
        const w = step.with ?? {};
        for (const [input, variable] of Object.entries(LOGIN_INPUTS)) {
          if (String(w[input] ?? '').replace(/\s+/g, '') !== `\${{vars.${variable}}}`) {
            problems.push(`${where}: azure/login ${input} is ${JSON.stringify(w[input])}, want \${{ vars.${variable} }}`);
          }
        }
        for (const input of ['creds', 'client-secret']) {
          if (w[input] !== undefined) problems.push(`${where}: azure/login takes ${input}; federated sign-in needs none`);
        }
      }
      const run = step.run ?? '';
      if (/\bazd auth login\b/.test(run)) {
        if (!/--federated-credential-provider\s+"?github"?/.test(run)) problems.push(`${where}: azd auth login without --federated-credential-provider github`);
        if (/--client-secret|--client-certificate/.test(run)) problems.push(`${where}: azd auth login with a secret or certificate`);
      }
    }
  }
  return problems;
}

/**
 * The README's test command: the command (before any `#` comment) of the
 * first line of the README's first code block that speaks of tests (in the
 * command or its comment).
 */
export function readmeTestCommand(readme) {
  const block = /^```[^\n]*\n([\s\S]*?)^```/m.exec(readme);
  if (!block) return null;
  for (const line of block[1].split('\n')) {
    const command = line.replace(/#.*$/, '').trim();
    if (command && /\btests?\b/.test(line)) return command;
  }
  return null;
}

/** The Node.js major version the README asks for ("Node.js 20"). */
export function readmeNodeVersion(readme) {
  return /Node\.js (\d+)/.exec(readme)?.[1] ?? null;
}

// A shell pipe (not ||).
const PIPE = /(?<!\|)\|(?!\|)/;

/** Whether a workflow's `on:` runs on pull requests and on pushes to main. */
function onPullRequestsAndMain(on) {
  const events = typeof on === 'string' ? { [on]: null } : Array.isArray(on) ? Object.fromEntries(on.map((e) => [e, null])) : on ?? {};
  const push = events.push;
  const pushBranches = push === null ? null : push?.branches;
  return 'pull_request' in events && 'push' in events && (pushBranches === null || (pushBranches ?? []).includes('main'));
}

/**
 * ci.yml runs on pull requests and pushes to main, sets up Go from go.mod and
 * the Node.js version the README names, with module and npm caches, and runs exactly the
 * README's test command. If its output is piped to tee (to keep it), the step
 * runs under `shell: bash` (GitHub then adds -o pipefail, so a failing test
 * still fails the step), and an upload-artifact step on failure() keeps
 * exactly that file.
 */
export function checkCi(texts) {
  const rel = `${WORKFLOW_DIR}/ci.yml`;
  if (!(rel in texts)) return [`${rel} is missing`];
  const problems = [];
  const want = readmeTestCommand(texts['README.md']);
  if (!want) return ['README.md: no test command in its first code block'];
  const wf = parseYaml(rel, texts[rel]);
  if (!onPullRequestsAndMain(wf.on)) problems.push(`${rel}: does not run on pull_request and push to main`);
  const all = steps(wf);
  const go = all.find(({ step }) => actionOf(step) === 'actions/setup-go');
  if (go?.step.with?.['go-version-file'] !== 'go.mod') problems.push(`${rel}: setup-go does not take the Go version from go.mod`);
  if (go && go.step.with?.cache === false) problems.push(`${rel}: setup-go has the module cache off`);
  const node = all.find(({ step }) => actionOf(step) === 'actions/setup-node');
  const nodeVersion = readmeNodeVersion(texts['README.md']);
  if (String(node?.step.with?.['node-version']) !== nodeVersion) {
    problems.push(`${rel}: setup-node node-version is ${node?.step.with?.['node-version']}, the README asks for Node.js ${nodeVersion}`);
  }
  if (node?.step.with?.cache !== 'npm' || node?.step.with?.['cache-dependency-path'] !== 'tools/package-lock.json') {
    problems.push(`${rel}: setup-node does not cache npm keyed on tools/package-lock.json`);
  }
  const runs = all.filter(({ step }) => typeof step.run === 'string');
  const pipeline = (run) => run.trim().split(PIPE).map((s) => s.trim());
  const testSteps = runs.filter(({ step }) => pipeline(step.run)[0].replace(/\s*2>&1$/, '') === want);
  if (testSteps.length !== 1) {
    problems.push(`${rel}: ${testSteps.length} steps run exactly the README's test command "${want}", want 1 (runs: ${runs.map(({ step }) => JSON.stringify(step.run.trim())).join(', ')})`);
    return problems;
  }
  const { step } = testSteps[0];
  const [, ...piped] = pipeline(step.run);
  let log = null;
  if (piped.length) {
    const tee = piped.length === 1 ? /^tee ([\w./-]+)$/.exec(piped[0]) : null;
    if (!tee) problems.push(`${rel}: the test step pipes into ${JSON.stringify(piped.join(' | '))}, want only tee <file>`);
    else log = tee[1];
    if (step.shell !== 'bash') problems.push(`${rel}: the test step pipes into tee without shell: bash, so a failing "${want}" would pass (no pipefail)`);
  }
  const upload = all.find(({ step: s }) => actionOf(s) === 'actions/upload-artifact');
  if (!upload || !/\bfailure\(\)/.test(String(upload.step.if ?? ''))) problems.push(`${rel}: no upload-artifact step that runs on failure()`);
  else if (log && upload.step.with?.path !== log) problems.push(`${rel}: upload-artifact keeps ${upload.step.with?.path}, the test log is ${log}`);
  else if (!log) problems.push(`${rel}: the test step's output is not written to a file the artifact keeps`);
  return problems;
}

/** The env var names infra/main.parameters.json maps parameters to. */
export function parameterVariables(paramsJson) {
  const names = new Set();
  for (const m of paramsJson.matchAll(/\$\{([A-Z_][A-Z0-9_]*)(?:[:=][^}]*)?\}/g)) names.add(m[1]);
  return [...names].sort();
}

/** Every vars.NAME an expression of the text reads. */
function varsRead(text) {
  return [...new Set([...text.matchAll(/\bvars\.([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]))].sort();
}

/**
 * The Azure workflows read exactly the repository variables `azd pipeline
 * config` sets: azure-dev.yml puts each of AZD_PIPELINE_VARIABLES and each
 * variable of infra/main.parameters.json (but the principal ones azd fills
 * itself) into its job's env from vars.<same name>; no workflow reads a
 * variable outside that set. azure-dev.yml runs on push to main and by hand,
 * signs az in before `azd provision` (the hooks use az), sets Go up from
 * go.mod (the preflight needs go and make), and runs `azd provision` then
 * `azd deploy`. The PIPELINE_FIXED_VARIABLES are the exception: no workflow
 * reads them from vars, and azure-dev.yml sets each to its fixed value.
 */
export function checkAzureVariables(texts) {
  const problems = [];
  const fixed = Object.keys(PIPELINE_FIXED_VARIABLES);
  const params = parameterVariables(texts['infra/main.parameters.json'])
    .filter((v) => !AZD_PRINCIPAL_VARIABLES.includes(v) && !fixed.includes(v));
  const allowed = new Set([...AZD_PIPELINE_VARIABLES, ...params]);
  for (const rel of workflowPaths(texts)) {
    for (const name of varsRead(texts[rel])) {
      if (fixed.includes(name)) {
        problems.push(`${rel}: forwards vars.${name}, which would give the pipeline's service principal (the conformance job's identity) data roles on the app's tables and queues; set it to '${PIPELINE_FIXED_VARIABLES[name]}'`);
      } else if (!allowed.has(name)) problems.push(`${rel}: reads vars.${name}, which azd pipeline config does not set`);
    }
  }
  const rel = `${WORKFLOW_DIR}/azure-dev.yml`;
  if (!(rel in texts)) return [...problems, `${rel} is missing`];
  const wf = parseYaml(rel, texts[rel]);
  const on = wf.on ?? {};
  if (!('workflow_dispatch' in on) || !(on.push?.branches ?? []).includes('main')) problems.push(`${rel}: does not run on push to main and workflow_dispatch`);
  const jobs = Object.entries(wf.jobs ?? {});
  if (jobs.length !== 1) return [...problems, `${rel}: ${jobs.length} jobs, want 1`];
  const [name, job] = jobs[0];
  const env = job.env ?? {};
  for (const v of [...AZD_PIPELINE_VARIABLES, ...params]) {
    const value = String(env[v] ?? '').replace(/\s+/g, '');
    if (!value.startsWith(`\${{vars.${v}}}`) && !value.startsWith(`\${{vars.${v}||`)) {
      problems.push(`${rel}: job ${name} env ${v} is ${JSON.stringify(env[v])}, want \${{ vars.${v} }}`);
    }
  }
  for (const [v, want] of Object.entries(PIPELINE_FIXED_VARIABLES)) {
    if (String(env[v]) !== want) problems.push(`${rel}: job ${name} env ${v} is ${JSON.stringify(env[v])}, want '${want}' (never from vars)`);
  }
  for (const v of AZD_PRINCIPAL_VARIABLES) {
    if (v in env) problems.push(`${rel}: job ${name} env sets ${v}, which azd fills with the signed-in principal`);
  }
  const list = (job.steps ?? []).map((s) => ({ action: actionOf(s), run: s.run ?? '', with: s.with ?? {} }));
  const at = (pred) => list.findIndex(pred);
  const login = at((s) => s.action === 'azure/login');
  const provision = at((s) => /^azd provision\b/m.test(s.run));
  const deploy = at((s) => /^azd deploy\b/m.test(s.run));
  const go = at((s) => s.action === 'actions/setup-go' && s.with['go-version-file'] === 'go.mod');
  if (provision < 0 || deploy < 0 || deploy < provision) problems.push(`${rel}: does not run azd provision, then azd deploy`);
  if (login < 0 || login > provision) problems.push(`${rel}: az is not signed in (azure/login) before azd provision; the hooks use az`);
  if (go < 0 || go > provision) problems.push(`${rel}: Go is not set up from go.mod before azd provision; the preflight needs it`);
  if (at((s) => /\bazd auth login\b/.test(s.run)) < 0) problems.push(`${rel}: azd is never signed in (azd auth login)`);
  return problems;
}

/** The module paths go.mod requires directly. */
export function directModules(gomod) {
  const mods = [];
  for (const block of gomod.matchAll(/^require\s*\(([\s\S]*?)^\)/gm)) {
    for (const line of block[1].split('\n')) {
      const m = /^\s*(\S+)\s+v\S+\s*$/.exec(line);
      if (m) mods.push(m[1]);
    }
  }
  for (const m of gomod.matchAll(/^require\s+(\S+)\s+v\S+\s*$/gm)) mods.push(m[1]);
  return mods;
}

const glob = (pattern) => new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);

/**
 * Dependabot updates Go modules (/), the npm tools (/tools) and the GitHub
 * Actions (/) weekly, and one gomod group holds every Azure SDK module go.mod
 * requires directly, so they move together.
 */
export function checkDependabot(texts) {
  const problems = [];
  const cfg = parseYaml(DEPENDABOT, texts[DEPENDABOT]);
  if (cfg.version !== 2) problems.push(`${DEPENDABOT}: version ${cfg.version}, want 2`);
  const updates = cfg.updates ?? [];
  for (const [ecosystem, directory] of [['gomod', '/'], ['npm', '/tools'], ['github-actions', '/']]) {
    const u = updates.find((x) => x['package-ecosystem'] === ecosystem && x.directory === directory);
    if (!u) problems.push(`${DEPENDABOT}: no ${ecosystem} updates for ${directory}`);
    else if (u.schedule?.interval !== 'weekly') problems.push(`${DEPENDABOT}: ${ecosystem} interval ${u.schedule?.interval}, want weekly`);
  }
  const gomod = updates.find((x) => x['package-ecosystem'] === 'gomod') ?? {};
  const azure = directModules(texts['go.mod']).filter((m) => m.startsWith('github.com/Azure/azure-sdk-for-go/'));
  const groups = Object.entries(gomod.groups ?? {});
  const holding = groups.filter(([, g]) => azure.every((m) => (g.patterns ?? []).some((p) => glob(p).test(m))));
  if (azure.length === 0) problems.push('go.mod: no Azure SDK module found (update this check)');
  else if (holding.length === 0) problems.push(`${DEPENDABOT}: no gomod group holds every Azure SDK module (${azure.join(', ')})`);
  return problems;
}

/** Every ./scripts/... a workflow runs exists and is executable. */
export function checkScripts(texts, exists = (rel) => {
  try {
    return (statSync(path.join(repoRoot, rel)).mode & 0o111) !== 0;
  } catch {
    return false;
  }
}) {
  const problems = [];
  for (const rel of workflowPaths(texts)) {
    for (const m of texts[rel].matchAll(/\.\/(scripts\/[\w./-]+)/g)) {
      if (!exists(m[1])) problems.push(`${rel}: runs ./${m[1]}, which is missing or not executable`);
    }
  }
  return problems;
}
