// The storage account: host storage for the Functions runtime (blobs), the
// Flex Consumption deployment container, and the two tables the handler
// owns: orderstatus (the order rows) and deadletters (the dead-letter store:
// every dead-lettered and parked message, its state and its audit entries).
// Infra creates both: the app's roles are scoped to each table, and with a
// table-scoped role the service may refuse CreateTable (403) even when the
// table exists, so the handler never relies on creating one. Shared keys are disabled: every caller authenticates with Entra ID.

@description('Storage account name (3-24 lowercase letters and digits, globally unique).')
@minLength(3)
@maxLength(24)
param name string

@description('Azure region.')
param location string

@description('Tags applied to every resource.')
param tags object = {}

@description('Blob container that holds the Flex Consumption deployment package.')
param deploymentContainerName string

@description('Principal (object) id of the function app identity.')
param appPrincipalId string

@description('Principal (object) id of the person or pipeline running azd. Empty: no deployer access.')
param deployerPrincipalId string = ''

@description('Type of deployerPrincipalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param deployerPrincipalType string = 'User'

@description('Log Analytics workspace that receives the blob and table services\' logs and metrics (diagnostic settings).')
param logAnalyticsWorkspaceId string

@description('Give the deployer Storage Table Data Contributor on the two tables (for orderstatus deadletters). Off by default.')
param grantDeployerDataOwner bool = false

@description('Principal (object) id of the operators who run orderstatus deadletters (a group, preferably): Table Data Contributor on the dead-letter store, Table Data Reader on the order table. Empty: none.')
param operatorPrincipalId string = ''

@description('Type of operatorPrincipalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param operatorPrincipalType string = 'Group'

var orderStoreTableName = 'orderstatus'
var deadLetterTableName = 'deadletters'
var tableNames = [
  orderStoreTableName
  deadLetterTableName
]

// Built-in role definition ids.
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageTableDataContributor = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
// Storage Table Data Reader: tables/read and tables/entities/read only
// ("Azure built-in roles for Storage", MicrosoftDocs/azure-docs
// articles/role-based-access-control/built-in-roles/storage.md).
var storageTableDataReader = '76199698-9eea-4c19-bc75-cec21354c6b6'

var grantDeployer = grantDeployerDataOwner && !empty(deployerPrincipalId)
var grantOperator = !empty(operatorPrincipalId)

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    allowBlobPublicAccess: false
    supportsHttpsTrafficOnly: true
    allowCrossTenantReplication: false
    // Flex Consumption without a virtual network reaches host storage, the
    // deployment container and the tables over the public endpoint; every
    // caller must present an Entra ID token (allowSharedKeyAccess: false).
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storageAccount
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: storageAccount
  name: 'default'
}

resource tables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [for tableName in tableNames: {
  parent: tableService
  name: tableName
}]

// Read, write and delete logs (StorageRead, StorageWrite, StorageDelete:
// caller identity, status, latency) and transaction metrics of the blob and
// table services go to the workspace, so a runbook can see a 403 or a
// throttled write from the store. 2021-05-01-preview: the only version with
// categoryGroup (allLogs); the GA 2016-09-01 needs every category named.
resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: blobService
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
        category: 'Transaction'
        enabled: true
      }
    ]
  }
}

// 2021-05-01-preview: as for the blob service above (categoryGroup).
resource tableDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: tableService
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
        category: 'Transaction'
        enabled: true
      }
    ]
  }
}

// Host storage (AzureWebJobsStorage) creates and leases its own containers,
// and the deployment container lives in the same account, so this role is
// assigned on the account: the narrowest scope that covers both.
resource appBlobDataOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storageAccount.id, appPrincipalId, storageBlobDataOwner)
  scope: storageAccount
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// One assignment per table: the app can read and write its two tables and
// nothing else in the account's table service.
resource appTableDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (tableName, i) in tableNames: {
  name: guid(tables[i].id, appPrincipalId, storageTableDataContributor)
  scope: tables[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

resource deployerTableDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (tableName, i) in tableNames: if (grantDeployer) {
  name: guid(tables[i].id, deployerPrincipalId, storageTableDataContributor)
  scope: tables[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}]

// The operators' orderstatus deadletters: every command reads and changes the
// dead-letter store (tables[1], deadletters); find --order only reads the
// order row (tables[0], orderstatus), so Reader there.
resource operatorDeadLetterTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantOperator) {
  name: guid(tables[1].id, operatorPrincipalId, storageTableDataContributor)
  scope: tables[1]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}

resource operatorOrderTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantOperator) {
  name: guid(tables[0].id, operatorPrincipalId, storageTableDataReader)
  scope: tables[0]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataReader)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}

output accountName string = storageAccount.name
output blobEndpoint string = storageAccount.properties.primaryEndpoints.blob
output tableEndpoint string = storageAccount.properties.primaryEndpoints.table
output deploymentContainerName string = deploymentContainer.name
output orderStoreTableName string = orderStoreTableName
output deadLetterTableName string = deadLetterTableName
