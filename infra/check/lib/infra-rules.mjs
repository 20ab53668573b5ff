// The invariants of infra/: each check takes a loaded Project and returns a
// list of problems (strings), empty when the Bicep holds the invariant. The
// tests run every check on the real files and on deliberately broken copies,
// so a check that cannot fail is itself caught.

import { Expr, Template, isExpr, isPlainObject } from './bicep.mjs';

/** Built-in role definition ids (infra-facts.md) and their names. */
export const ROLE_NAMES = {
  '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0': 'Azure Service Bus Data Receiver',
  '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39': 'Azure Service Bus Data Sender',
  '090c5cfd-751d-490a-894a-3ce6f1109419': 'Azure Service Bus Data Owner',
  'b7e6dc6d-f1e8-4753-8033-0f276bb0955b': 'Storage Blob Data Owner',
  '974c5e8b-45b9-4653-ba55-5f855dd0fb88': 'Storage Queue Data Contributor',
  '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3': 'Storage Table Data Contributor',
  // "Azure built-in roles for Storage" (built-in-roles/storage.md).
  '76199698-9eea-4c19-bc75-cec21354c6b6': 'Storage Table Data Reader',
  '3913510d-42f4-4e42-8a64-420c390055eb': 'Monitoring Metrics Publisher',
  // "Azure built-in roles for Web and Mobile" (built-in-roles/web-and-mobile.md):
  // Microsoft.Web/sites/*, which holds sites/config/write (the kill switch).
  'de139f84-1756-47ae-9be6-808fbbe84772': 'Website Contributor',
};

/** order-status exactly as the seed's provisioning script creates it. */
export const ORDER_STATUS_QUEUE_PROPERTIES = {
  requiresSession: true,
  maxDeliveryCount: 5,
  lockDuration: 'PT1M',
  requiresDuplicateDetection: true,
  duplicateDetectionHistoryTimeWindow: 'PT10M',
  defaultMessageTimeToLive: 'P7D',
  deadLetteringOnMessageExpiration: true,
};

export const QUEUE_NAMES = { orderStatus: 'order-status', poison: 'order-status-poison' };
export const TABLE_NAMES = ['orderstatus', 'deadletters'];

/**
 * Settings in local.settings.json.template that must NOT be set in Azure,
 * each with the reason. Every other key of the template must be.
 */
export const LOCAL_ONLY_SETTINGS = {
  FUNCTIONS_WORKER_RUNTIME:
    'Flex Consumption takes the runtime from functionAppConfig.runtime and rejects this setting',
  AzureWebJobsStorage:
    'connection-string form of host storage; Azure uses AzureWebJobsStorage__accountName with the managed identity',
  OrderStore__connectionString:
    'local development only (Azurite); Azure uses OrderStore__serviceUri with the managed identity',
};

/**
 * Settings handler/internal/config/config.go reads (its Env* constants) that
 * are deliberately not app settings, each with the reason. Every other one
 * must be in local.settings.json.template and set on the function app.
 */
export const HANDLER_ENV_NOT_APP_SETTINGS = {
  FUNCTIONS_CUSTOMHANDLER_PORT:
    'the Functions host sets it for the handler process it starts; an app setting would be ignored or conflict',
  ORDERSTATUS_DEV_BROKER_URL:
    "set only by 'orderstatus-dev dev' for its in-memory Service Bus; never in Azure",
  OrderStore__connectionString:
    'local development only (Azurite); Azure uses OrderStore__serviceUri with the managed identity',
};

/** The setting names of the Env* constants in config.go source text, in order. */
export function handlerEnvNames(goSource) {
  return [...goSource.matchAll(/^\s*Env\w*\s*=\s*"([^"]+)"/gm)].map((m) => m[1]);
}

/**
 * The app settings of the function app: {ctx, settings} with settings the
 * literal object of its Microsoft.Web/sites/config 'appsettings', or null
 * when there is not exactly one site with one such object.
 */
export function functionAppSettings(project) {
  const sites = declared(project, 'Microsoft.Web/sites');
  if (sites.length !== 1) return null;
  const { ctx } = sites[0];
  const configs = ctx.file.resourcesOfType('Microsoft.Web/sites/config').filter((r) => r.body.name === 'appsettings');
  const settings = configs.length === 1 ? configs[0].body.properties : null;
  return isPlainObject(settings) ? { ctx, settings } : null;
}

/**
 * Every setting config.go reads (envNames, from handlerEnvNames) is in the
 * template's Values and set on the function app, except the ones in
 * HANDLER_ENV_NOT_APP_SETTINGS; every exception is still read by config.go.
 */
export function checkHandlerSettings(project, templateValues, envNames) {
  const problems = [];
  const source = 'handler/internal/config/config.go';
  if (envNames.length === 0) return [`found no Env* = "..." constants in ${source}: has the list moved?`];
  const app = functionAppSettings(project);
  if (!app) problems.push('want one function app with a literal appsettings object');
  for (const name of envNames) {
    if (name in HANDLER_ENV_NOT_APP_SETTINGS) continue;
    if (!(name in templateValues)) problems.push(`${name} (read by ${source}) is not in local.settings.json.template`);
    if (app && !(name in app.settings)) problems.push(`${name} (read by ${source}) is not set on the function app`);
  }
  for (const name of Object.keys(HANDLER_ENV_NOT_APP_SETTINGS)) {
    if (!envNames.includes(name)) problems.push(`HANDLER_ENV_NOT_APP_SETTINGS lists ${name}, which ${source} no longer reads: remove it`);
  }
  return problems;
}

/** Settings Flex Consumption rejects or that would reintroduce shared keys. */
export const FORBIDDEN_SETTINGS = [
  'FUNCTIONS_WORKER_RUNTIME',
  'FUNCTIONS_WORKER_RUNTIME_VERSION',
  'FUNCTIONS_EXTENSION_VERSION',
  'WEBSITE_RUN_FROM_PACKAGE',
  'SCM_DO_BUILD_DURING_DEPLOYMENT',
  'WEBSITE_CONTENTAZUREFILECONNECTIONSTRING',
  'WEBSITE_CONTENTSHARE',
  'AzureWebJobsStorage',
  'DEPLOYMENT_STORAGE_CONNECTION_STRING',
  'OrderStore__connectionString',
];

/** Reads a dotted path from an evaluated value; undefined when absent. */
export function at(value, dotted) {
  let v = value;
  for (const key of dotted.split('.')) {
    if (!isPlainObject(v) || !(key in v)) return undefined;
    v = v[key];
  }
  return v;
}

/** Seconds in an ISO 8601 duration such as P7D, PT10M or P1DT2H; NaN if malformed. */
export function durationSeconds(iso) {
  const text = String(iso);
  const m = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/.exec(text);
  if (!m || text === 'P' || text.endsWith('T')) return NaN;
  const [d, h, min, s] = m.slice(1).map((x) => Number(x ?? 0));
  return ((d * 24 + h) * 60 + min) * 60 + s;
}

function show(v) {
  if (v instanceof Expr) return v.text;
  return JSON.stringify(v);
}

/** Non-existing resources of a type across the project, each with its file context. */
export function declared(project, type) {
  const out = [];
  for (const [rel, ctx] of project.contexts()) {
    for (const r of ctx.file.resourcesOfType(type)) {
      if (!r.existing) out.push({ rel, ctx, resource: r });
    }
  }
  return out;
}

/** The names a resource declaration creates: several for a loop over a literal list. */
export function resourceNames(project, ctx, resource) {
  const name = resource.body.name;
  if (resource.loop && Array.isArray(resource.loop.iterable) && isExpr(name, resource.loop.item)) {
    return resource.loop.iterable.map((n) => project.resolve(ctx, n).value);
  }
  return [project.resolve(ctx, name).value];
}

function one(problems, list, what) {
  if (list.length !== 1) {
    problems.push(`want exactly one ${what}, got ${list.length}`);
    return null;
  }
  return list[0];
}

function expectEqual(problems, where, got, want) {
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    problems.push(`${where}: got ${show(got)}, want ${show(want)}`);
  }
}

/** Service Bus: Standard namespace without local auth, TLS 1.2, and the two queues. */
export function checkServiceBus(project) {
  const problems = [];
  const ns = one(problems, declared(project, 'Microsoft.ServiceBus/namespaces'), 'Service Bus namespace');
  if (!ns) return problems;
  const body = ns.resource.body;
  expectEqual(problems, 'namespace sku.name', at(body, 'sku.name'), 'Standard');
  expectEqual(problems, 'namespace sku.tier', at(body, 'sku.tier'), 'Standard');
  expectEqual(problems, 'namespace disableLocalAuth', at(body, 'properties.disableLocalAuth'), true);
  expectEqual(problems, 'namespace minimumTlsVersion', at(body, 'properties.minimumTlsVersion'), '1.2');

  const queues = new Map();
  for (const q of declared(project, 'Microsoft.ServiceBus/namespaces/queues')) {
    for (const name of resourceNames(project, q.ctx, q.resource)) queues.set(name, q);
    if (!isExpr(q.resource.body.parent, ns.resource.symbol) || q.rel !== ns.rel) {
      problems.push(`queue ${q.resource.symbol}: parent is ${show(q.resource.body.parent)}, want ${ns.resource.symbol}`);
    }
  }
  expectEqual(problems, 'queue names', [...queues.keys()].sort(), Object.values(QUEUE_NAMES).sort());

  const main = queues.get(QUEUE_NAMES.orderStatus);
  if (main) {
    expectEqual(problems, `${QUEUE_NAMES.orderStatus} properties`, main.resource.body.properties, ORDER_STATUS_QUEUE_PROPERTIES);
  }
  const poison = queues.get(QUEUE_NAMES.poison);
  if (poison) {
    const p = poison.resource.body.properties ?? {};
    const where = QUEUE_NAMES.poison;
    expectEqual(problems, `${where} requiresSession`, p.requiresSession, false);
    expectEqual(problems, `${where} requiresDuplicateDetection`, p.requiresDuplicateDetection, true);
    expectEqual(problems, `${where} deadLetteringOnMessageExpiration`, p.deadLetteringOnMessageExpiration, true);
    if (!(durationSeconds(p.duplicateDetectionHistoryTimeWindow) > 0)) {
      problems.push(`${where} duplicateDetectionHistoryTimeWindow: got ${show(p.duplicateDetectionHistoryTimeWindow)}, want a duration`);
    }
    const ttl = durationSeconds(p.defaultMessageTimeToLive);
    if (!(ttl > durationSeconds(ORDER_STATUS_QUEUE_PROPERTIES.defaultMessageTimeToLive))) {
      problems.push(`${where} defaultMessageTimeToLive: got ${show(p.defaultMessageTimeToLive)}, want longer than ${ORDER_STATUS_QUEUE_PROPERTIES.defaultMessageTimeToLive}`);
    }
  }
  return problems;
}

/** Storage: no shared keys, TLS 1.2, no public blobs, the two tables, the deployment container. */
export function checkStorage(project) {
  const problems = [];
  const acct = one(problems, declared(project, 'Microsoft.Storage/storageAccounts'), 'storage account');
  if (!acct) return problems;
  const props = acct.resource.body.properties ?? {};
  expectEqual(problems, 'storage allowSharedKeyAccess', props.allowSharedKeyAccess, false);
  expectEqual(problems, 'storage minimumTlsVersion', props.minimumTlsVersion, 'TLS1_2');
  expectEqual(problems, 'storage allowBlobPublicAccess', props.allowBlobPublicAccess, false);
  expectEqual(problems, 'storage supportsHttpsTrafficOnly', props.supportsHttpsTrafficOnly, true);
  expectEqual(problems, 'storage allowCrossTenantReplication', props.allowCrossTenantReplication, false);

  const tables = declared(project, 'Microsoft.Storage/storageAccounts/tableServices/tables')
    .flatMap((t) => resourceNames(project, t.ctx, t.resource));
  expectEqual(problems, 'tables', [...tables].sort(), [...TABLE_NAMES].sort());

  const containers = declared(project, 'Microsoft.Storage/storageAccounts/blobServices/containers');
  const container = one(problems, containers, 'blob container (the Flex deployment package)');
  if (container) {
    const access = container.resource.body.properties?.publicAccess;
    expectEqual(problems, 'deployment container publicAccess', access ?? 'None', 'None');
  }
  return problems;
}

/** Application Insights: workspace-based, local (key) authentication disabled. */
export function checkMonitoring(project) {
  const problems = [];
  const ai = one(problems, declared(project, 'Microsoft.Insights/components'), 'Application Insights component');
  if (ai) {
    const props = ai.resource.body.properties ?? {};
    expectEqual(problems, 'Application Insights DisableLocalAuth', props.DisableLocalAuth, true);
    const ws = props.WorkspaceResourceId;
    const wsRes = ws instanceof Expr && ws.ref?.kind === 'resource' ? ai.ctx.file.resource(ws.ref.name) : null;
    if (!wsRes || wsRes.type !== 'Microsoft.OperationalInsights/workspaces' || !isExpr(ws, `${wsRes.symbol}.id`)) {
      problems.push(`Application Insights WorkspaceResourceId: got ${show(ws)}, want the id of a Log Analytics workspace`);
    }
  }
  const ws = one(problems, declared(project, 'Microsoft.OperationalInsights/workspaces'), 'Log Analytics workspace');
  if (ws) {
    // No shared-key (workspace key) ingestion: Entra ID only.
    expectEqual(problems, 'Log Analytics features.disableLocalAuth', at(ws.resource.body, 'properties.features.disableLocalAuth'), true);
  }
  return problems;
}

/**
 * Diagnostic settings: the Service Bus namespace and the storage account's
 * blob and table services each send all logs (categoryGroup allLogs) and
 * their metrics to the Log Analytics workspace the monitoring module creates,
 * so the runbooks can query them.
 */
export function checkDiagnostics(project) {
  const problems = [];
  const wants = {
    'Microsoft.ServiceBus/namespaces': 'AllMetrics',
    'Microsoft.Storage/storageAccounts/blobServices': 'Transaction',
    'Microsoft.Storage/storageAccounts/tableServices': 'Transaction',
  };
  const found = new Map();
  for (const { rel, ctx, resource } of declared(project, 'Microsoft.Insights/diagnosticSettings')) {
    const where = `${rel} ${resource.symbol}`;
    const scope = resource.body.scope;
    const target = scope instanceof Expr && scope.ref?.kind === 'resource' ? ctx.file.resource(scope.ref.name) : null;
    if (!target) {
      problems.push(`${where}: scope ${show(scope)} is not a resource of this file`);
      continue;
    }
    const props = resource.body.properties ?? {};
    const { value: ws, ctx: wsCtx } = project.resolve(ctx, props.workspaceId);
    const m = ws instanceof Expr ? /^(\w+)\.id$/.exec(ws.text.replace(/\s+/g, '')) : null;
    if (wsCtx?.file.resource(m?.[1])?.type !== 'Microsoft.OperationalInsights/workspaces') {
      problems.push(`${where}: workspaceId ${show(props.workspaceId)} is not the id of the Log Analytics workspace`);
    }
    const logs = Array.isArray(props.logs) ? props.logs : [];
    if (!logs.some((l) => l.categoryGroup === 'allLogs' && l.enabled === true)) {
      problems.push(`${where}: logs must include { categoryGroup: 'allLogs', enabled: true }`);
    }
    const metrics = Array.isArray(props.metrics) ? props.metrics : [];
    const want = wants[target.type];
    if (want && !metrics.some((x) => x.category === want && x.enabled === true)) {
      problems.push(`${where}: metrics must include { category: '${want}', enabled: true }`);
    }
    found.set(target.type, (found.get(target.type) ?? 0) + 1);
  }
  for (const type of Object.keys(wants)) {
    if (found.get(type) !== 1) problems.push(`want one diagnostic setting on ${type}, got ${found.get(type) ?? 0}`);
  }
  return problems;
}

/**
 * The diagnostic-setting metric categories the project enables, by the
 * resource type of each setting's scope: {'Microsoft.ServiceBus/namespaces':
 * ['AllMetrics'], ...}. What the KQL check takes as "exported here".
 */
export function diagnosticMetricCategories(project) {
  const out = {};
  for (const { ctx, resource } of declared(project, 'Microsoft.Insights/diagnosticSettings')) {
    const scope = resource.body.scope;
    const target = scope instanceof Expr && scope.ref?.kind === 'resource' ? ctx.file.resource(scope.ref.name) : null;
    if (!target) continue;
    const metrics = Array.isArray(resource.body.properties?.metrics) ? resource.body.properties.metrics : [];
    out[target.type] = [...(out[target.type] ?? []), ...metrics.filter((m) => m.enabled === true).map((m) => m.category)];
  }
  return out;
}

// The identity output an expression resolves to, e.g. 'clientId' for
// identity.properties.clientId in identity.bicep; null otherwise.
function identityAttribute(project, ctx, value) {
  const { value: v, ctx: where } = project.resolve(ctx, value);
  if (!(v instanceof Expr) || !where) return null;
  const m = /^(\w+)\.(?:properties\.)?(\w+)$/.exec(v.text);
  if (!m) return null;
  const res = where.file.resource(m[1]);
  if (!res || res.type !== 'Microsoft.ManagedIdentity/userAssignedIdentities') return null;
  return m[2];
}

/**
 * Returns null when value resolves to the host name of the Service Bus
 * namespace derived from the endpoint Azure reports,
 * replace(replace(<namespace>.properties.serviceBusEndpoint, 'https://', ''), ':443/', ''),
 * and a description of the problem otherwise. A hard-coded
 * '<name>.servicebus.windows.net' is refused: it is wrong in sovereign clouds.
 */
export function serviceBusHostProblem(project, ctx, value) {
  const { value: v, ctx: where } = project.resolve(ctx, value);
  const text = v instanceof Expr ? v.text.replace(/\s+/g, '') : '';
  const m = /^replace\(replace\((\w+)\.properties\.serviceBusEndpoint,'https:\/\/',''\),':443\/',''\)$/.exec(text);
  const res = m && where ? where.file.resource(m[1]) : null;
  if (res?.type === 'Microsoft.ServiceBus/namespaces') return null;
  return `got ${show(v)}, want replace(replace(<namespace>.properties.serviceBusEndpoint, 'https://', ''), ':443/', '') of the Service Bus namespace`;
}

/**
 * The function app: Flex Consumption FC1, runtime custom 1.0, deployment
 * storage through the user-assigned identity, scale settings from parameters,
 * and every app setting the handler reads (templateValues: the Values of
 * local.settings.json.template).
 */
export function checkFunctionApp(project, templateValues) {
  const problems = [];
  const plan = one(problems, declared(project, 'Microsoft.Web/serverfarms'), 'App Service plan');
  if (plan) {
    const b = plan.resource.body;
    expectEqual(problems, 'plan sku.name', at(b, 'sku.name'), 'FC1');
    expectEqual(problems, 'plan sku.tier', at(b, 'sku.tier'), 'FlexConsumption');
    expectEqual(problems, 'plan reserved (Linux)', at(b, 'properties.reserved'), true);
  }
  const site = one(problems, declared(project, 'Microsoft.Web/sites'), 'function app');
  if (!site) return problems;
  const { ctx } = site;
  const b = site.resource.body;
  const kind = String(b.kind);
  if (!kind.includes('functionapp') || !kind.includes('linux')) {
    problems.push(`site kind: got ${show(b.kind)}, want functionapp,linux`);
  }
  if (plan && !isExpr(at(b, 'properties.serverFarmId'), `${plan.resource.symbol}.id`)) {
    problems.push(`site serverFarmId: got ${show(at(b, 'properties.serverFarmId'))}, want ${plan.resource.symbol}.id`);
  }
  expectEqual(problems, 'site identity.type', at(b, 'identity.type'), 'UserAssigned');
  const uai = at(b, 'identity.userAssignedIdentities');
  const uaiKeys = isPlainObject(uai) ? Object.keys(uai) : [];
  if (uaiKeys.length !== 1) problems.push(`site userAssignedIdentities: got ${uaiKeys.length} identities, want 1`);

  const cfg = at(b, 'properties.functionAppConfig');
  expectEqual(problems, 'functionAppConfig.runtime', at(cfg, 'runtime'), { name: 'custom', version: '1.0' });
  expectEqual(problems, 'deployment.storage.type', at(cfg, 'deployment.storage.type'), 'blobContainer');
  expectEqual(problems, 'deployment.storage.authentication.type', at(cfg, 'deployment.storage.authentication.type'), 'UserAssignedIdentity');
  const uaiRef = at(cfg, 'deployment.storage.authentication.userAssignedIdentityResourceId');
  if (identityAttribute(project, ctx, uaiRef) !== 'id') {
    problems.push(`deployment storage identity: got ${show(uaiRef)}, want the user-assigned identity's id`);
  } else if (uaiKeys.length === 1 && uaiKeys[0] !== `'\${${uaiRef.text}}'`) {
    problems.push(`site userAssignedIdentities: got ${uaiKeys[0]}, want the identity the deployment storage uses ('\${${uaiRef.text}}')`);
  }

  // The package container is the one the storage module creates.
  const storageValue = at(cfg, 'deployment.storage.value');
  const containerExpr = storageValue instanceof Template ? storageValue.parts.at(-1) : null;
  const containerName = containerExpr instanceof Expr ? project.resolve(ctx, containerExpr).value : undefined;
  const created = declared(project, 'Microsoft.Storage/storageAccounts/blobServices/containers')
    .flatMap((c) => resourceNames(project, c.ctx, c.resource));
  if (typeof containerName !== 'string' || !created.includes(containerName)) {
    problems.push(`deployment.storage.value: container ${show(containerName)} is not a container the storage module creates (${created.join(', ')})`);
  }
  if (!(storageValue instanceof Template) || !/primaryEndpoints\.blob/.test(storageValue.text)) {
    problems.push(`deployment.storage.value: got ${show(storageValue)}, want <blob endpoint><container>`);
  }

  // No basic-auth publishing: ftp and scm policies, each allow: false.
  const policies = new Map();
  for (const r of ctx.file.resourcesOfType('Microsoft.Web/sites/basicPublishingCredentialsPolicies')) {
    if (!isExpr(r.body.parent, site.resource.symbol)) problems.push(`${r.symbol}: parent ${show(r.body.parent)}, want ${site.resource.symbol}`);
    policies.set(r.body.name, at(r.body, 'properties.allow'));
  }
  for (const name of ['ftp', 'scm']) {
    if (policies.get(name) !== false) problems.push(`basicPublishingCredentialsPolicies ${name}: allow ${show(policies.get(name))}, want false (no basic-auth publishing)`);
  }
  expectEqual(problems, 'site httpsOnly', at(b, 'properties.httpsOnly'), true);
  expectEqual(problems, 'site siteConfig.minTlsVersion', at(b, 'properties.siteConfig.minTlsVersion'), '1.2');

  // Instance memory and maximum instance count are parameters of main.bicep.
  for (const key of ['instanceMemoryMB', 'maximumInstanceCount']) {
    const v = at(cfg, `scaleAndConcurrency.${key}`);
    let c = ctx;
    let cur = v;
    while (cur instanceof Expr && cur.ref?.kind === 'param' && c.caller && c.args && cur.text in c.args) {
      cur = c.args[cur.text];
      c = c.caller;
    }
    if (!(cur instanceof Expr && cur.ref?.kind === 'param' && c.caller === null)) {
      problems.push(`scaleAndConcurrency.${key}: got ${show(v)}, want a parameter of main.bicep`);
    }
  }

  // Always-ready instances: only for OrderStatus, which scales on its own
  // instances (function:OrderStatus), and only as many as the parameter says.
  const ready = at(cfg, 'scaleAndConcurrency.alwaysReady');
  const readyText = ready instanceof Expr ? ready.text.replace(/\s+/g, '') : '';
  if (!(readyText.startsWith('alwaysReadyInstances>0?[') && readyText.includes("name:'function:OrderStatus'")
    && readyText.includes('instanceCount:alwaysReadyInstances') && readyText.endsWith(']:[]'))) {
    problems.push(`scaleAndConcurrency.alwaysReady: want the instances of function:OrderStatus from the parameter alwaysReadyInstances, none when 0; got ${show(ready)}`);
  }

  // App settings.
  const configs = ctx.file.resourcesOfType('Microsoft.Web/sites/config').filter((r) => r.body.name === 'appsettings');
  if (configs.length !== 1) {
    problems.push(`want one Microsoft.Web/sites/config named appsettings, got ${configs.length}`);
    return problems;
  }
  const settings = configs[0].body.properties;
  if (!isPlainObject(settings)) {
    problems.push('appsettings properties must be a literal object so each setting can be checked');
    return problems;
  }
  if (!isExpr(configs[0].body.parent, site.resource.symbol)) {
    problems.push(`appsettings parent: got ${show(configs[0].body.parent)}, want ${site.resource.symbol}`);
  }
  for (const key of Object.keys(templateValues)) {
    if (key in LOCAL_ONLY_SETTINGS) continue;
    if (!(key in settings)) problems.push(`app setting ${key} (read by the handler or host) is not set`);
  }
  for (const key of FORBIDDEN_SETTINGS) {
    if (key in settings) problems.push(`app setting ${key} must not be set on Flex Consumption with identity-based connections`);
  }
  for (const key of Object.keys(settings)) {
    if (/connectionstring$/i.test(key) && key !== 'APPLICATIONINSIGHTS_CONNECTION_STRING') {
      problems.push(`app setting ${key}: connection strings are not used; connect with the managed identity`);
    }
  }

  const resolved = (key) => project.resolve(ctx, settings[key]).value;
  for (const key of ['AzureWebJobsStorage__credential', 'ServiceBusConnection__credential']) {
    expectEqual(problems, `app setting ${key}`, resolved(key), 'managedidentity');
  }
  for (const key of ['AzureWebJobsStorage__clientId', 'ServiceBusConnection__clientId', 'AZURE_CLIENT_ID']) {
    if (identityAttribute(project, ctx, settings[key]) !== 'clientId') {
      problems.push(`app setting ${key}: got ${show(settings[key])}, want the user-assigned identity's clientId`);
    }
  }
  const ai = settings.APPLICATIONINSIGHTS_AUTHENTICATION_STRING;
  const aiOk = ai instanceof Template && ai.parts.length === 3 && ai.parts[0] === 'ClientId=' &&
    ai.parts[2] === ';Authorization=AAD' && identityAttribute(project, ctx, ai.parts[1]) === 'clientId';
  if (!aiOk) problems.push(`APPLICATIONINSIGHTS_AUTHENTICATION_STRING: got ${show(ai)}, want ClientId=<identity clientId>;Authorization=AAD`);
  const fqdnProblem = serviceBusHostProblem(project, ctx, settings.ServiceBusConnection__fullyQualifiedNamespace);
  if (fqdnProblem) problems.push(`ServiceBusConnection__fullyQualifiedNamespace: ${fqdnProblem}`);
  const tableUri = resolved('OrderStore__serviceUri');
  if (!(tableUri instanceof Expr && /primaryEndpoints\.table$/.test(tableUri.text))) {
    problems.push(`OrderStore__serviceUri: got ${show(tableUri)}, want the storage account's table endpoint`);
  }
  // Host storage is the account the storage module creates.
  const accountRef = settings.AzureWebJobsStorage__accountName;
  const accountRes = accountRef instanceof Expr && /^\w+\.name$/.test(accountRef.text)
    ? ctx.file.resource(accountRef.text.split('.')[0]) : null;
  const accounts = declared(project, 'Microsoft.Storage/storageAccounts');
  const sameAccount = accountRes?.type === 'Microsoft.Storage/storageAccounts' && accounts.length === 1 &&
    show(project.resolve(ctx, accountRef).value) === show(resourceNames(project, accounts[0].ctx, accounts[0].resource)[0]);
  if (!sameAccount) {
    problems.push(`AzureWebJobsStorage__accountName: got ${show(accountRef)}, want the name of the storage account the storage module creates`);
  }
  // Where the template has a concrete default, Azure must agree with it.
  for (const [key, want] of Object.entries(templateValues)) {
    if (key in LOCAL_ONLY_SETTINGS || !(key in settings) || want === '' || want.includes('<')) continue;
    const got = resolved(key);
    if (typeof got === 'string' || typeof got === 'number' || typeof got === 'boolean') {
      expectEqual(problems, `app setting ${key} (Azure vs local.settings.json.template)`, String(got), want);
    }
  }
  return problems;
}

// Expands variables in a condition to their source text, so a condition
// written through a variable (if (grantDeployer)) reads as what it tests.
function expandCondition(file, text) {
  let out = text;
  for (let i = 0; i < 5; i++) {
    const next = out.replace(/\b[A-Za-z_]\w*\b/g, (id) => (file.vars.has(id) ? `(${file.vars.get(id).text})` : id));
    if (next === out) break;
    out = next;
  }
  return out.replace(/\s+/g, '');
}

/**
 * Every role assignment in the project as one line per scope:
 * "<role> @ <scope type>[:<name>] -> <app|deployer|producer|operator>[ if <switch>]", plus the
 * problems found while reading them (naming, principal type, unknown role).
 */
export function roleAssignments(project) {
  const lines = [];
  const problems = [];
  for (const { rel, ctx, resource } of declared(project, 'Microsoft.Authorization/roleAssignments')) {
    const where = `${rel} ${resource.symbol}`;
    const { file } = ctx;
    const body = resource.body;
    const props = body.properties ?? {};

    // Role: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', <id>)
    const rd = props.roleDefinitionId;
    let roleId = null;
    let roleArg = null;
    if (rd instanceof Expr && rd.type === 'call_expression') {
      const args = rd.node.childForFieldName('arguments').namedChildren;
      if (args.length === 2 && file.value(args[0]) === 'Microsoft.Authorization/roleDefinitions') {
        roleArg = args[1];
        roleId = file.value(args[1]);
      }
    }
    const role = ROLE_NAMES[roleId];
    if (!role) {
      problems.push(`${where}: roleDefinitionId ${show(rd)} is not one of the known built-in roles`);
      continue;
    }

    // Scope: a resource declared in the same file.
    const scope = body.scope;
    let scopeRes = null;
    if (scope instanceof Expr && scope.ref?.kind === 'resource') scopeRes = file.resource(scope.ref.name);
    if (!scopeRes) {
      problems.push(`${where}: scope ${scope === undefined ? '(none: the whole resource group)' : show(scope)} is not a resource of this file`);
      continue;
    }
    const shortType = scopeRes.type.split('/').at(-1);
    let names = /^(queues|tables|containers)$/.test(shortType)
      ? resourceNames(project, ctx, scopeRes)
      : [null];
    // One element of a resource loop (scope: tables[1]): that element's name.
    if (scope.node?.type === 'subscript_expression') {
      const index = file.value(scope.node.childForFieldName('index'));
      if (typeof index === 'number') names = [names[index] ?? `?[${index}]`];
    }

    // Principal: the app identity or the deployer, nothing else.
    const principal = props.principalId;
    let who = null;
    if (isExpr(principal, 'appPrincipalId') && identityAttribute(project, ctx, principal) === 'principalId') {
      who = 'app';
      expectEqual(problems, `${where} principalType`, props.principalType, 'ServicePrincipal');
    } else if (isExpr(principal, 'deployerPrincipalId')) {
      who = 'deployer';
    } else if (isExpr(principal, 'producerPrincipalId')) {
      who = 'producer';
    } else if (isExpr(principal, 'operatorPrincipalId')) {
      who = 'operator';
    } else {
      problems.push(`${where}: principalId ${show(principal)} is neither the app identity, the deployer, the producer nor the operators`);
      continue;
    }

    // Name: guid(scope.id, principal, role), stable across deployments.
    const nameText = body.name instanceof Expr ? body.name.text.replace(/\s+/g, '') : '';
    const wantName = `guid(${scope.text}.id,${principal.text},${roleArg.text})`.replace(/\s+/g, '');
    if (nameText !== wantName) problems.push(`${where}: name ${show(body.name)}, want ${wantName}`);

    let cond = '';
    if (resource.condition) {
      const c = expandCondition(file, resource.condition.text);
      if (c.includes('grantDeployerDataOwner') && c.includes('!empty(deployerPrincipalId)')) cond = ' if grantDeployerDataOwner';
      else if (c.includes('grantAppQueueOwnerForScaling')) cond = ' if grantAppQueueOwnerForScaling';
      else if (/^\(*!empty\(producerPrincipalId\)\)*$/.test(c)) cond = ' if producerPrincipalId';
      else if (c.includes('grantOperatorKillSwitch') && c.includes('!empty(operatorPrincipalId)')) cond = ' if grantOperatorKillSwitch';
      else if (/^\(*!empty\(operatorPrincipalId\)\)*$/.test(c)) cond = ' if operatorPrincipalId';
      else cond = ` if ${c}`;
    }
    for (const n of names) {
      lines.push(`${role} @ ${shortType}${n === null ? '' : ':' + n} -> ${who}${cond}`);
    }
  }
  return { lines: lines.sort(), problems };
}
