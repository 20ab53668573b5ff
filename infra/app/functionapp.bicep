// The Flex Consumption plan and the function app that runs the Go custom
// handler (runtime "custom" 1.0). Every connection is identity-based through
// the one user-assigned identity: no connection strings, no keys.

@description('Function app name (globally unique).')
param name string

@description('Flex Consumption plan name.')
param planName string

@description('Azure region.')
param location string

@description('Tags applied to every resource.')
param tags object = {}

@description('Resource id of the user-assigned identity.')
param identityId string

@description('Client id of the user-assigned identity.')
param identityClientId string

@description('Storage account used as host storage and for the deployment package.')
param storageAccountName string

@description('Blob container that holds the deployment package.')
param deploymentContainerName string

@description('Application Insights component name.')
param applicationInsightsName string

@description('Service Bus namespace host name, <namespace>.servicebus.windows.net.')
param serviceBusFullyQualifiedNamespace string

@description('Queue the OrderStatus function consumes.')
param orderStatusQueueName string

@description('Queue the handler parks poison messages in.')
param poisonQueueName string

@description('Table holding one row per order.')
param orderStoreTableName string

@description('Table of the dead-letter store: every dead-lettered and parked message, its state and its audit entries.')
param deadLetterTableName string

@description('Memory of each instance in MB (512 by default: see main.bicep and the README, Cost).')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 512

@description('Upper bound on the on-demand instances of each function (Flex Consumption: 40 to 1000; see main.bicep).')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Instances of the OrderStatus function kept running while idle, so that the first message after a quiet spell needs no cold start. 0: scale to zero.')
@minValue(0)
param alwaysReadyInstances int = 0

@description('Bounded in-call retry budget for transient store errors (Go duration), well below the 1 minute lock; past it a message is rescheduled (docs/outages.md).')
param orderStatusRetryBudget string = '5s'

@description('NCRONTAB schedule of the DeadLetterSweeper timer.')
param deadLetterSweepSchedule string = '0 */5 * * * *'

@description('Handler log level.')
@allowed([
  'debug'
  'info'
  'warn'
  'error'
])
param logLevel string = 'info'

@description('Principal (object) id of the operators. Empty: none.')
param operatorPrincipalId string = ''

@description('Type of operatorPrincipalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param operatorPrincipalType string = 'Group'

@description('Give the operators Website Contributor on the app, for the kill switch (docs/outages.md). Off by default.')
param grantOperatorKillSwitch bool = false

// Website Contributor ("Azure built-in roles for Web and Mobile",
// MicrosoftDocs/azure-docs articles/role-based-access-control/built-in-roles/web-and-mobile.md):
// its actions include Microsoft.Web/sites/*, which holds
// Microsoft.Web/sites/config/write, the right to change an app setting.
var websiteContributor = 'de139f84-1756-47ae-9be6-808fbbe84772'

var grantKillSwitch = grantOperatorKillSwitch && !empty(operatorPrincipalId)

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

// No azd-service-name tag: azure.yaml declares no service (the postdeploy
// hook deploys the package), so nothing would look the tag up.
resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storageAccount.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
        // OrderStatus scales on its own instances (function:OrderStatus);
        // always-ready ones are billed while idle (docs/observability.md).
        alwaysReady: alwaysReadyInstances > 0 ? [
          {
            name: 'function:OrderStatus'
            instanceCount: alwaysReadyInstances
          }
        ] : []
      }
      runtime: {
        name: 'custom'
        version: '1.0'
      }
    }
  }
}

// Every setting the handler and the host read (local.settings.json.template
// lists them). Flex Consumption takes the runtime from functionAppConfig, so
// FUNCTIONS_WORKER_RUNTIME is deliberately absent.
resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: site
  name: 'appsettings'
  properties: {
    AzureWebJobsStorage__accountName: storageAccount.name
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    ServiceBusConnection__fullyQualifiedNamespace: serviceBusFullyQualifiedNamespace
    ServiceBusConnection__credential: 'managedidentity'
    ServiceBusConnection__clientId: identityClientId
    ORDER_STATUS_QUEUE: orderStatusQueueName
    POISON_QUEUE: poisonQueueName
    OrderStore__serviceUri: storageAccount.properties.primaryEndpoints.table
    OrderStore__tableName: orderStoreTableName
    DEAD_LETTER_TABLE: deadLetterTableName
    AZURE_CLIENT_ID: identityClientId
    ORDER_STATUS_RETRY_BUDGET: orderStatusRetryBudget
    // Outages become delays (docs/outages.md): the handler's defaults,
    // set here so the portal shows what the app runs with; set
    // ORDER_STATUS_RETRY_RESCHEDULE to 'false' for the policy before it.
    ORDER_STATUS_RETRY_RESCHEDULE: 'true'
    ORDER_STATUS_RETRY_BASE: '10s'
    ORDER_STATUS_RETRY_CAP: '5m'
    ORDER_STATUS_RETRY_WINDOW: '24h'
    ORDER_STATUS_PAYMENT_TIMEOUT: '30m'
    DEAD_LETTER_SWEEP_SCHEDULE: deadLetterSweepSchedule
    // The sweeper's policy knobs, at their defaults (the handler's own
    // defaults; set here so the portal shows what the app runs with).
    DEAD_LETTER_REPLAY_COOLDOWN: '10m'
    DEAD_LETTER_MAX_REPLAYS: '3'
    DEAD_LETTER_SWEEP_RATE: '10'
    DEAD_LETTER_RETENTION: '720h'
    LOG_LEVEL: logLevel
    APPLICATIONINSIGHTS_CONNECTION_STRING: appInsights.properties.ConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
  }
}

// No basic-auth (user name and password) publishing: neither FTP nor the
// SCM (Kudu) endpoint accepts publishing credentials. The deploy hook
// publishes with an Entra ID token (az functionapp deployment source
// config-zip on Flex Consumption, docs/deploy.md), which these do not affect.
resource ftpPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'scm'
  properties: {
    allow: false
  }
}

// The kill switch: the operators may set AzureWebJobs.OrderStatus.Disabled
// (docs/outages.md). Scoped to this app; no other resource.
resource operatorKillSwitch 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantKillSwitch) {
  name: guid(site.id, operatorPrincipalId, websiteContributor)
  scope: site
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', websiteContributor)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}

output name string = site.name
output id string = site.id
output defaultHostName string = site.properties.defaultHostName
