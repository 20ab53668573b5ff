// orderstatus: everything `azd provision` creates, in one resource group.
//
//   identity     user-assigned managed identity the function app uses for everything
//   monitoring   Log Analytics + Application Insights (Entra ID ingestion only)
//   serviceBus   namespace, queues order-status and order-status-poison, queue-scoped roles
//   storage      account (no shared keys), tables, deployment container, roles
//   functionApp  Flex Consumption plan and app (custom handler), identity-based settings
//   alerts       action group, metric and log alerts with runbook links, workbook

targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; with the subscription and location it seeds every resource name.')
param environmentName string

@minLength(1)
@description('Azure region for every resource. It must offer the Flex Consumption plan (az functionapp list-flexconsumption-locations).')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Object id of the person or pipeline running azd (azd sets AZURE_PRINCIPAL_ID). Used only when grantDeployerDataOwner is true.')
param principalId string = ''

@description('Type of principalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param principalType string = 'User'

@description('Give principalId Azure Service Bus Data Owner on both queues and Storage Table Data Contributor on the two tables, for running orderstatus deadletters against Azure. Off by default; never needed by the app. operatorPrincipalId grants less, to whoever answers the alerts.')
param grantDeployerDataOwner bool = false

@description('Object id of the operators who answer the alerts (a group, preferably): gets exactly the data roles the runbooks\' bin/orderstatus deadletters commands use (Azure Service Bus Data Receiver on both queues and Data Sender on order-status; Storage Table Data Contributor on the dead-letter store and Storage Table Data Reader on the order table). Empty: none.')
param operatorPrincipalId string = ''

@description('Type of operatorPrincipalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param operatorPrincipalType string = 'Group'

@description('Also give operatorPrincipalId Website Contributor on the function app: the right (Microsoft.Web/sites/config/write) to flip the kill switch, AzureWebJobs.OrderStatus.Disabled (docs/outages.md). Off by default: the role carries all of Microsoft.Web/sites/* on the app.')
param grantOperatorKillSwitch bool = false

@description('Give the app identity Azure Service Bus Data Owner on order-status (that queue only) so the target-based scaler can read the queue length and scale out under a backlog. On by default; see docs/deploy.md for the trade-off.')
param grantAppQueueOwnerForScaling bool = true

@description('Object id of a producer (a service that publishes status changes) to give Azure Service Bus Data Sender on order-status and nothing else. Empty: none.')
param producerPrincipalId string = ''

@description('Type of producerPrincipalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param producerPrincipalType string = 'ServicePrincipal'

@description('Memory of each function app instance in MB. 512 by default: a lone execution bills at least 1 s at this size, so it sets the cost of every message (README, Cost); the handler stays under 30 MB and the platform adds 272 MB for the host and system, unbilled (flex-consumption-plan.md, Instance sizes).')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 512

// 40: "The lowest maximum scale is currently 40. The highest currently
// supported value is 1000" (MicrosoftDocs/azure-docs,
// articles/azure-functions/flex-consumption-plan.md, Considerations, Scale).
// event-driven-scaling.md ("Limit scale-out") gives 1 as the lowest: the two
// pages disagree, so the template keeps 40, which both accept, and a
// deployment cannot fail on it where the floor of 40 is enforced.
@description('Upper bound on the on-demand instances of each function (per-function scaling). 40 to 1000: the floor Flex Consumption guarantees in every region (flex-consumption-plan.md, Considerations).')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Always-ready instances of the OrderStatus function (billed while idle; docs/observability.md says what 1 costs and buys). 0: scale to zero.')
@minValue(0)
@maxValue(20)
param alwaysReadyInstances int = 0

@description('In-call retry budget for transient store errors (Go duration); past it a message is rescheduled.')
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

@description('E-mail address the alerts notify. Empty: the action group has no receiver (alerts still fire and show in the portal).')
param alertEmail string = ''

@description('Base URL of alerts/runbooks in your copy of the repository; each alert links to <runbookBaseUrl>/<alert-name>.md. Empty: a placeholder URL.')
param runbookBaseUrl string = ''

@description('Active messages on order-status above which the backlog alert fires.')
@minValue(1)
param backlogThreshold int = 100

@description('Age in seconds of the oldest dead-lettered or parked message above which the age alert fires.')
@minValue(60)
param deadLetterAgeThresholdSeconds int = 3600

@description('Failed OrderStatus invocations in 15 minutes above which the failure alert fires.')
@minValue(0)
param failedInvocationsThreshold int = 5

@description('Rescheduled OrderStatus messages in 15 minutes above which the outage alert fires.')
@minValue(0)
param rescheduledThreshold int = 10

@description('Scheduled messages on order-status (maximum over 5 minutes) above which the scheduled-surge alert fires: about twice the orders created in your busiest 30 minutes, plus 50 (alerts/README.md).')
@minValue(1)
param scheduledMessagesThreshold int = 500

var abbrs = loadJsonContent('abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
var deploymentContainerName = 'app-package'
var defaultRunbookBaseUrl = 'https://github.com/your-org/orderstatus/blob/main/alerts/runbooks'

resource rg 'Microsoft.Resources/resourceGroups@2021-04-01' = {
  name: '${abbrs.resourcesResourceGroups}${environmentName}'
  location: location
  tags: tags
}

module identity 'app/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'app/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    applicationInsightsName: '${abbrs.insightsComponents}${resourceToken}'
    location: location
    tags: tags
    appPrincipalId: identity.outputs.principalId
  }
}

module serviceBus 'app/servicebus.bicep' = {
  name: 'servicebus'
  scope: rg
  params: {
    name: '${abbrs.serviceBusNamespaces}${resourceToken}'
    location: location
    tags: tags
    appPrincipalId: identity.outputs.principalId
    grantAppQueueOwnerForScaling: grantAppQueueOwnerForScaling
    deployerPrincipalId: principalId
    deployerPrincipalType: principalType
    grantDeployerDataOwner: grantDeployerDataOwner
    producerPrincipalId: producerPrincipalId
    producerPrincipalType: producerPrincipalType
    operatorPrincipalId: operatorPrincipalId
    operatorPrincipalType: operatorPrincipalType
    logAnalyticsWorkspaceId: monitoring.outputs.logAnalyticsWorkspaceId
  }
}

module storage 'app/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: '${abbrs.storageStorageAccounts}${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
    appPrincipalId: identity.outputs.principalId
    deployerPrincipalId: principalId
    deployerPrincipalType: principalType
    grantDeployerDataOwner: grantDeployerDataOwner
    operatorPrincipalId: operatorPrincipalId
    operatorPrincipalType: operatorPrincipalType
    logAnalyticsWorkspaceId: monitoring.outputs.logAnalyticsWorkspaceId
  }
}

// Depends on the three modules above through their outputs, so the app is
// created after its role assignments.
module functionApp 'app/functionapp.bicep' = {
  name: 'functionapp'
  scope: rg
  params: {
    name: '${abbrs.webSitesFunctions}${resourceToken}'
    planName: '${abbrs.webServerFarms}${resourceToken}'
    location: location
    tags: tags
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.accountName
    deploymentContainerName: storage.outputs.deploymentContainerName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    orderStatusQueueName: serviceBus.outputs.orderStatusQueueName
    poisonQueueName: serviceBus.outputs.poisonQueueName
    orderStoreTableName: storage.outputs.orderStoreTableName
    deadLetterTableName: storage.outputs.deadLetterTableName
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    alwaysReadyInstances: alwaysReadyInstances
    orderStatusRetryBudget: orderStatusRetryBudget
    deadLetterSweepSchedule: deadLetterSweepSchedule
    logLevel: logLevel
    operatorPrincipalId: operatorPrincipalId
    operatorPrincipalType: operatorPrincipalType
    grantOperatorKillSwitch: grantOperatorKillSwitch
  }
}

module alerts '../alerts/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    location: location
    tags: tags
    actionGroupName: '${abbrs.insightsActionGroups}${resourceToken}'
    alertEmail: alertEmail
    runbookBaseUrl: empty(runbookBaseUrl) ? defaultRunbookBaseUrl : runbookBaseUrl
    serviceBusNamespaceName: serviceBus.outputs.namespaceName
    orderStatusQueueName: serviceBus.outputs.orderStatusQueueName
    poisonQueueName: serviceBus.outputs.poisonQueueName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    storageAccountName: storage.outputs.accountName
    functionAppName: functionApp.outputs.name
    backlogThreshold: backlogThreshold
    deadLetterAgeThresholdSeconds: deadLetterAgeThresholdSeconds
    failedInvocationsThreshold: failedInvocationsThreshold
    rescheduledThreshold: rescheduledThreshold
    scheduledMessagesThreshold: scheduledMessagesThreshold
  }
}

// azd stores these in .azure/<env>/.env; the deploy hook and the runbooks read them.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output AZURE_FUNCTION_APP_HOSTNAME string = functionApp.outputs.defaultHostName
output AZURE_MANAGED_IDENTITY_CLIENT_ID string = identity.outputs.clientId
output SERVICE_BUS_NAMESPACE string = serviceBus.outputs.namespaceName
output STORAGE_ACCOUNT_NAME string = storage.outputs.accountName
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.applicationInsightsName

// The same names the handler reads as app settings, so that
// `set -a; eval "$(azd env get-values)"; set +a` configures bin/handler
// against this environment (it then authenticates as you, through az login).
output ServiceBusConnection__fullyQualifiedNamespace string = serviceBus.outputs.fullyQualifiedNamespace
output ORDER_STATUS_QUEUE string = serviceBus.outputs.orderStatusQueueName
output POISON_QUEUE string = serviceBus.outputs.poisonQueueName
output OrderStore__serviceUri string = storage.outputs.tableEndpoint
output OrderStore__tableName string = storage.outputs.orderStoreTableName
output DEAD_LETTER_TABLE string = storage.outputs.deadLetterTableName
