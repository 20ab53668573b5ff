// Log Analytics and a workspace-based Application Insights component that
// accepts Entra ID (AAD) authenticated telemetry only, plus the one role the
// function app's identity needs to send it.

@description('Log Analytics workspace name.')
param logAnalyticsName string

@description('Application Insights component name.')
param applicationInsightsName string

@description('Azure region.')
param location string

@description('Tags applied to every resource.')
param tags object = {}

@description('Principal (object) id of the function app identity.')
param appPrincipalId string

@description('Days Log Analytics keeps data.')
@minValue(30)
@maxValue(730)
param retentionInDays int = 30

// Monitoring Metrics Publisher: lets the identity ingest telemetry when local
// (instrumentation key) authentication is disabled.
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
    features: {
      // Ingestion and queries with Entra ID only: no shared-key (workspace
      // key) ingestion through the legacy agents or the Data Collector API.
      disableLocalAuth: true
    }
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    IngestionMode: 'LogAnalytics'
    DisableLocalAuth: true
  }
}

resource appMetricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, appPrincipalId, monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output applicationInsightsName string = appInsights.name
output applicationInsightsId string = appInsights.id
output logAnalyticsWorkspaceId string = logAnalytics.id
output logAnalyticsName string = logAnalytics.name
