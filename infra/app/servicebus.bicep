// The Service Bus namespace, the two queues the product owns and every Service
// Bus role assignment, each scoped to a single queue.
//
// order-status is created exactly as the seed's provisioning script creates
// it. Sessions and duplicate detection can only be chosen when a queue is
// created: changing them later means a new queue.

@description('Service Bus namespace name (globally unique).')
param name string

@description('Azure region.')
param location string

@description('Tags applied to every resource.')
param tags object = {}

@description('Principal (object) id of the function app identity.')
param appPrincipalId string

@description('Give the app identity Azure Service Bus Data Owner on order-status (that queue only), so the target-based scaler can read the queue\'s runtime properties (the Manage right) and scale out under a backlog. On by default; see docs/deploy.md for what turning it off trades.')
param grantAppQueueOwnerForScaling bool = true

@description('Log Analytics workspace that receives the namespace\'s logs and metrics (diagnostic settings).')
param logAnalyticsWorkspaceId string

@description('Principal (object) id of the person or pipeline running azd. Empty: no deployer access.')
param deployerPrincipalId string = ''

@description('Type of deployerPrincipalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param deployerPrincipalType string = 'User'

@description('Give the deployer Azure Service Bus Data Owner on both queues (for orderstatus deadletters and the portal Service Bus Explorer). Off by default.')
param grantDeployerDataOwner bool = false

@description('Principal (object) id of a producer (the service that publishes status changes) to give Azure Service Bus Data Sender on order-status, and nothing else. Empty: none.')
param producerPrincipalId string = ''

@description('Type of producerPrincipalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param producerPrincipalType string = 'ServicePrincipal'

@description('Principal (object) id of the operators who run orderstatus deadletters (a group, preferably): Data Receiver on both queues, Data Sender on order-status. Empty: none.')
param operatorPrincipalId string = ''

@description('Type of operatorPrincipalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param operatorPrincipalType string = 'Group'

var orderStatusQueueName = 'order-status'
var poisonQueueName = 'order-status-poison'

// Built-in role definition ids.
var serviceBusDataReceiver = '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
var serviceBusDataSender = '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
var serviceBusDataOwner = '090c5cfd-751d-490a-894a-3ce6f1109419'

var grantDeployer = grantDeployerDataOwner && !empty(deployerPrincipalId)
var grantProducer = !empty(producerPrincipalId)
var grantOperator = !empty(operatorPrincipalId)

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    // Basic has neither sessions nor duplicate detection.
    name: 'Standard'
    tier: 'Standard'
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    // Flex Consumption without a virtual network reaches the namespace over
    // its public endpoint; Entra ID is the only way in (disableLocalAuth).
    publicNetworkAccess: 'Enabled'
  }
}

// Operation, runtime-audit and VNet logs and every metric go to the
// workspace, so the runbooks can query who did what to the queues.
// 2021-05-01-preview: the only version with categoryGroup (allLogs); the GA
// 2016-09-01 needs every category named, and the categories differ by tier.
resource namespaceDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: namespace
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'AllMetrics'
        enabled: true
      }
    ]
  }
}

// The queue producers send to and the OrderStatus function consumes.
resource orderStatusQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: orderStatusQueueName
  properties: {
    requiresSession: true
    maxDeliveryCount: 5
    lockDuration: 'PT1M'
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    defaultMessageTimeToLive: 'P7D'
    deadLetteringOnMessageExpiration: true
  }
}

// Where the handler parks poison messages (with DeadLetterReason and
// DeadLetterErrorDescription as application properties). No trigger reads it:
// only the DeadLetterSweeper and orderstatus deadletters do. Duplicate detection
// turns a re-park of the same message into a no-op; the long TTL gives people
// time to act, and anything that still expires is dead-lettered, not lost.
resource poisonQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: poisonQueueName
  properties: {
    requiresSession: false
    maxDeliveryCount: 10
    lockDuration: 'PT1M'
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    defaultMessageTimeToLive: 'P14D'
    deadLetteringOnMessageExpiration: true
  }
}

// The OrderStatus trigger receives from order-status; the sweeper receives
// from its dead-letter sub-queue, which this assignment covers.
resource appReceiverOrderStatus 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(orderStatusQueue.id, appPrincipalId, serviceBusDataReceiver)
  scope: orderStatusQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The sweeper replays dead-lettered messages into order-status.
resource appSenderOrderStatus 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(orderStatusQueue.id, appPrincipalId, serviceBusDataSender)
  scope: orderStatusQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The sweeper archives and completes parked messages, and reads the poison
// queue's own dead-letter sub-queue, which this assignment covers.
resource appReceiverPoison 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(poisonQueue.id, appPrincipalId, serviceBusDataReceiver)
  scope: poisonQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The handler parks poison messages.
resource appSenderPoison 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(poisonQueue.id, appPrincipalId, serviceBusDataSender)
  scope: poisonQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// On by default (grantAppQueueOwnerForScaling): the Service Bus extension's
// target-based scaler reads the queue's runtime properties (message count),
// which needs the Manage right; without it, it gives up on target-based
// scaling and the app scales out slowly or not at all under a backlog.
// Scoped to order-status: the app cannot manage any other entity.
resource appOwnerOrderStatus 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantAppQueueOwnerForScaling) {
  name: guid(orderStatusQueue.id, appPrincipalId, serviceBusDataOwner)
  scope: orderStatusQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataOwner)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource deployerOwnerOrderStatus 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantDeployer) {
  name: guid(orderStatusQueue.id, deployerPrincipalId, serviceBusDataOwner)
  scope: orderStatusQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataOwner)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

resource deployerOwnerPoison 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantDeployer) {
  name: guid(poisonQueue.id, deployerPrincipalId, serviceBusDataOwner)
  scope: poisonQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataOwner)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

// A producer of status changes: send on order-status, nothing else.
resource producerSenderOrderStatus 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantProducer) {
  name: guid(orderStatusQueue.id, producerPrincipalId, serviceBusDataSender)
  scope: orderStatusQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
    principalId: producerPrincipalId
    principalType: producerPrincipalType
  }
}

// The operators' orderstatus deadletters (handler/internal/cli/deadletters):
// stats peeks and sweep receives and completes on order-status/$DeadLetterQueue,
// order-status-poison and its dead-letter queue, as the app's sweeper does
// with the same role (a queue's assignment covers its dead-letter
// sub-queue); replay and orderstatus publish cancel-timeout send to
// order-status. Nothing reads runtime properties (Manage), so no Data
// Owner. Role ids and data actions (Receiver: */receive/action, Sender:
// */send/action): "Azure built-in roles for Integration"
// (MicrosoftDocs/azure-docs, articles/role-based-access-control/built-in-roles/integration.md).
resource operatorReceiverOrderStatus 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantOperator) {
  name: guid(orderStatusQueue.id, operatorPrincipalId, serviceBusDataReceiver)
  scope: orderStatusQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}

resource operatorSenderOrderStatus 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantOperator) {
  name: guid(orderStatusQueue.id, operatorPrincipalId, serviceBusDataSender)
  scope: orderStatusQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}

resource operatorReceiverPoison 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantOperator) {
  name: guid(poisonQueue.id, operatorPrincipalId, serviceBusDataReceiver)
  scope: poisonQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}

output namespaceName string = namespace.name
output namespaceId string = namespace.id
// The host name clients connect to, taken from the endpoint Azure reports
// (https://<namespace>.servicebus.windows.net:443/) so that sovereign clouds,
// whose suffix differs, get theirs.
output fullyQualifiedNamespace string = replace(replace(namespace.properties.serviceBusEndpoint, 'https://', ''), ':443/', '')
output orderStatusQueueName string = orderStatusQueue.name
output poisonQueueName string = poisonQueue.name
