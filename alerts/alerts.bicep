// Alerts for orderstatus, the action group they notify and the operations
// workbook. Every alert names its runbook: alerts/runbooks/<alert-name>.md,
// linked from the alert's description and from the notification payload
// (webHookProperties for metric alerts, customProperties for log alerts).

@description('Azure region of the log alerts and the workbook.')
param location string

@description('Tags applied to every resource.')
param tags object = {}

@description('Action group name.')
param actionGroupName string

@description('E-mail address notified by every alert. Empty: no receiver.')
param alertEmail string = ''

@description('Base URL of alerts/runbooks; a runbook link is <runbookBaseUrl>/<alert-name>.md.')
param runbookBaseUrl string

@description('Service Bus namespace name.')
param serviceBusNamespaceName string

@description('Queue the OrderStatus function consumes.')
param orderStatusQueueName string

@description('Queue poison messages are parked in.')
param poisonQueueName string

@description('Application Insights component name.')
param applicationInsightsName string

@description('Storage account name: the account of the order table (and the host\'s storage).')
param storageAccountName string

@description('Function app name.')
param functionAppName string

@description('Active messages on order-status above which the backlog alert fires.')
@minValue(1)
param backlogThreshold int = 100

@description('Age in seconds of the oldest dead-lettered or parked message above which the age alert fires.')
@minValue(60)
param deadLetterAgeThresholdSeconds int = 3600

@description('Failed OrderStatus invocations in 15 minutes above which the failure alert fires.')
@minValue(0)
param failedInvocationsThreshold int = 5

@description('Messages rescheduled (store failing past the in-call budget, or the circuit breaker open) in 15 minutes above which the outage alert fires.')
@minValue(0)
param rescheduledThreshold int = 10
@description('Service Bus user errors (lock lost, session lock lost, message not found...) on the namespace in 15 minutes above which the alert fires.')
@minValue(0)
param userErrorsThreshold int = 10

@description('Messages abandoned on order-status in 15 minutes above which the alert fires.')
@minValue(0)
param abandonedThreshold int = 5

@description('p95 of enqueued-to-settled lag, in seconds over 15 minutes (at least 5 messages), above which the freshness alert fires.')
@minValue(30)
param freshnessP95ThresholdSeconds int = 300

@description('Scheduled messages on order-status (maximum over 5 minutes) above which the scheduled-surge alert fires. Size it to about twice the orders created in your busiest 30 minutes, plus 50 (alerts/README.md).')
@minValue(1)
param scheduledMessagesThreshold int = 500

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: actionGroupName
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'orderstatus'
    enabled: true
    emailReceivers: empty(alertEmail) ? [] : [
      {
        name: 'operator'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

// Metric alerts on the namespace; the EntityName dimension selects queues.
// Thresholds follow the Azure Monitor Baseline Alerts for Service Bus.
// Dead letters are not watched by a metric: the sweeper drains both
// dead-letter queues and the poison queue into the dead-letter store within
// one schedule period, and DeadletteredMessages and ActiveMessages are
// message counts sampled once a minute with Average, Minimum and Maximum
// only, no Total ("Supported metrics - Microsoft.ServiceBus/Namespaces",
// Azure Monitor reference), so a message drained between two samples never
// shows. The sweeper's deadletter_stats lines count every message it drains
// (stored) and every one still open (depth): the log alerts below read them.
var metricAlerts = [
  {
    name: 'order-status-backlog'
    severity: 3
    summary: 'Active messages on order-status are above the backlog threshold: consumers are not keeping up.'
    metricName: 'ActiveMessages'
    dimensions: [
      {
        name: 'EntityName'
        operator: 'Include'
        values: [
          orderStatusQueueName
        ]
      }
    ]
    operator: 'GreaterThan'
    threshold: backlogThreshold
    timeAggregation: 'Average'
    windowSize: 'PT5M'
  }
  {
    name: 'service-bus-server-errors'
    severity: 2
    summary: 'Service Bus answered requests on the namespace with server errors.'
    metricName: 'ServerErrors'
    dimensions: []
    operator: 'GreaterThan'
    threshold: 0
    timeAggregation: 'Total'
    windowSize: 'PT5M'
  }
  {
    name: 'service-bus-throttled-requests'
    severity: 3
    summary: 'Service Bus throttled requests on the namespace (Standard tier credit limits).'
    metricName: 'ThrottledRequests'
    dimensions: []
    operator: 'GreaterThan'
    threshold: 0
    timeAggregation: 'Total'
    windowSize: 'PT5M'
  }
  {
    // Lock lost, session lock lost, message not found: the baseline fires on
    // any (> 0, 5 min); one scale-in or instance recycle loses up to
    // maxConcurrentSessions session locks at once and heals itself, so this
    // fires on more than one such event in 15 minutes.
    name: 'service-bus-user-errors'
    severity: 3
    summary: 'Service Bus counted user errors on the namespace (lock lost, session lock lost, message not found): calls outlive their locks, or instances stop holding sessions.'
    metricName: 'UserErrors'
    dimensions: []
    operator: 'GreaterThan'
    threshold: userErrorsThreshold
    timeAggregation: 'Total'
    windowSize: 'PT15M'
  }
  {
    // Every non-2xx answer of OrderStatus is one abandon; the baseline's > 1
    // in 5 min would page on one short storage blip that the retries absorb.
    // The same budget as the failed-invocations log alert, read from the
    // broker, so it fires even when telemetry does not arrive.
    name: 'order-status-abandoned'
    severity: 3
    summary: 'Messages on order-status are being abandoned (OrderStatus answered non-2xx): failures are being retried, and a message dead-letters after 5 deliveries.'
    metricName: 'AbandonMessage'
    dimensions: [
      {
        name: 'EntityName'
        operator: 'Include'
        values: [
          orderStatusQueueName
        ]
      }
    ]
    operator: 'GreaterThan'
    threshold: abandonedThreshold
    timeAggregation: 'Total'
    windowSize: 'PT15M'
  }
  {
    // Each Created schedules one PaymentTimeoutCheck 30 minutes ahead, so
    // the scheduled messages on order-status stay near the orders created
    // in the last 30 minutes; far more means retries are being rescheduled
    // (an outage) or a producer schedules in a loop. A metric alert: the
    // gauge is not exported by diagnostic settings ("DS Export: No",
    // MicrosoftDocs/azure-reference-other, azure-monitor-ref/supported-metrics/
    // includes/microsoft-servicebus-namespaces-metrics-include.md), so no log
    // query can read it, and a metric alert cannot compare it with the orders
    // created (Application Insights). Dynamic thresholds do not support
    // ScheduledMessages (MicrosoftDocs/azure-monitor-docs,
    // articles/azure-monitor/alerts/alerts-dynamic-thresholds.md, "Metrics not
    // supported by dynamic thresholds"), so the threshold is static and sized
    // by the operator (alerts/README.md); its default is the Azure Monitor
    // Baseline Alerts' 500 (Azure/azure-monitor-baseline-alerts,
    // services/ServiceBus/namespaces/alerts.yaml).
    name: 'order-status-scheduled-surge'
    severity: 3
    summary: 'Scheduled messages on order-status are above the threshold, more than the payment timeouts of recent orders explain: retries are being rescheduled (an outage), or a producer schedules too much.'
    metricName: 'ScheduledMessages'
    dimensions: [
      {
        name: 'EntityName'
        operator: 'Include'
        values: [
          orderStatusQueueName
        ]
      }
    ]
    operator: 'GreaterThan'
    threshold: scheduledMessagesThreshold
    timeAggregation: 'Maximum'
    windowSize: 'PT5M'
  }
]

resource metricAlertRules 'Microsoft.Insights/metricAlerts@2018-03-01' = [for alert in metricAlerts: {
  name: alert.name
  location: 'global'
  tags: tags
  properties: {
    description: '${alert.summary} Runbook: ${runbookBaseUrl}/${alert.name}.md'
    severity: alert.severity
    enabled: true
    scopes: [
      namespace.id
    ]
    evaluationFrequency: 'PT1M'
    windowSize: alert.windowSize
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: alert.metricName
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: alert.metricName
          dimensions: alert.dimensions
          operator: alert.operator
          threshold: alert.threshold
          timeAggregation: alert.timeAggregation
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
        webHookProperties: {
          runbook: '${runbookBaseUrl}/${alert.name}.md'
        }
      }
    ]
  }
}]

// A stalled consumer: order-status held active messages through 10 minutes
// and none left it (the baseline's OutgoingMessages <= 0, joined with
// ActiveMessages so that an idle queue stays quiet). Both criteria must
// hold (allOf). ActiveMessages' minimum over the window is above 0 only if
// messages waited the whole time.
resource stalledConsumerAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'order-status-stalled-consumer'
  location: 'global'
  tags: tags
  properties: {
    description: 'order-status has had active messages for 10 minutes and delivered none: nothing consumes the queue (the app is stopped, cannot start its handler, lost its role on the queue, or cannot scale). Runbook: ${runbookBaseUrl}/order-status-stalled-consumer.md'
    severity: 2
    enabled: true
    scopes: [
      namespace.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'NoneDelivered'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'OutgoingMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                orderStatusQueueName
              ]
            }
          ]
          operator: 'LessThanOrEqual'
          threshold: 0
          timeAggregation: 'Total'
        }
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'MessagesWaiting'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'ActiveMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                orderStatusQueueName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Minimum'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
        webHookProperties: {
          runbook: '${runbookBaseUrl}/order-status-stalled-consumer.md'
        }
      }
    ]
  }
}

// Metric alerts on the storage account (account-level metrics: the order
// table and the host's own storage). Availability counts only unexpected
// errors against the account (ETag conflicts, 404 and 409 do not lower it);
// the baseline (verified: true) fires below 100. Throttling: transactions
// whose ResponseType says the account pushed back.
var storageMetricAlerts = [
  {
    name: 'storage-availability'
    severity: 2
    summary: 'The storage account answered requests with unexpected errors (server errors, timeouts, throttling): Availability below 100 percent. Order updates are retried, then abandoned.'
    metricName: 'Availability'
    dimensions: []
    operator: 'LessThan'
    threshold: 100
    timeAggregation: 'Average'
  }
  {
    name: 'storage-throttled'
    severity: 3
    summary: 'The storage account throttled requests (ServerBusyError, ClientThrottlingError): the account is over a scalability target, most likely one partition (one order) or a burst of replays.'
    metricName: 'Transactions'
    dimensions: [
      {
        name: 'ResponseType'
        operator: 'Include'
        values: [
          'ServerBusyError'
          'ClientThrottlingError'
          'SuccessWithThrottling'
        ]
      }
    ]
    operator: 'GreaterThan'
    threshold: 0
    timeAggregation: 'Total'
  }
]

resource storageMetricAlertRules 'Microsoft.Insights/metricAlerts@2018-03-01' = [for alert in storageMetricAlerts: {
  name: alert.name
  location: 'global'
  tags: tags
  properties: {
    description: '${alert.summary} Runbook: ${runbookBaseUrl}/${alert.name}.md'
    severity: alert.severity
    enabled: true
    scopes: [
      storageAccount.id
    ]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: alert.metricName
          metricNamespace: 'Microsoft.Storage/storageAccounts'
          metricName: alert.metricName
          dimensions: alert.dimensions
          operator: alert.operator
          threshold: alert.threshold
          timeAggregation: alert.timeAggregation
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
        webHookProperties: {
          runbook: '${runbookBaseUrl}/${alert.name}.md'
        }
      }
    ]
  }
}]

// Resource Health of the three resources the system stands on, as the
// baseline's ResourceHealthUnhealthy activity-log alert (category
// ResourceHealth, currentHealthStatus Degraded or Unavailable), scoped to
// the resources instead of the subscription.
resource resourceHealthAlert 'Microsoft.Insights/activityLogAlerts@2020-10-01' = {
  name: 'resource-health-unhealthy'
  location: 'Global'
  tags: tags
  properties: {
    description: 'Azure Resource Health reports the Service Bus namespace, the storage account or the function app Degraded or Unavailable: a platform problem, not ours to fix, but it explains the other alerts. Runbook: ${runbookBaseUrl}/resource-health-unhealthy.md'
    enabled: true
    scopes: [
      namespace.id
      storageAccount.id
      functionApp.id
    ]
    condition: {
      allOf: [
        {
          field: 'category'
          equals: 'ResourceHealth'
        }
        {
          anyOf: [
            {
              field: 'properties.currentHealthStatus'
              equals: 'Degraded'
            }
            {
              field: 'properties.currentHealthStatus'
              equals: 'Unavailable'
            }
          ]
        }
      ]
    }
    actions: {
      actionGroups: [
        {
          actionGroupId: actionGroup.id
          webhookProperties: {
            runbook: '${runbookBaseUrl}/resource-health-unhealthy.md'
          }
        }
      ]
    }
  }
}

// Azure Monitor has no "age of the oldest message" metric. The sweeper logs
// one JSON line per source and reason on every run,
//   {"time":"...","level":"INFO","msg":"deadletter_stats","run_id":"<run>","source":"dlq|poison|poison-dlq","reason":"...","depth":N,"oldest_age_seconds":S}
// and, for a source with no message, one line with reason "" and depth 0.
// The dead-letter alerts read the sweeper's stats lines. Every run drains
// order-status/$DeadLetterQueue (source dlq), order-status-poison (poison)
// and order-status-poison/$DeadLetterQueue (poison-dlq) into the
// dead-letter store, acts on the store's entries, then logs one JSON line
// per source and reason:
//   {"time":"...","level":"INFO","msg":"deadletter_stats","run_id":"<run>","source":"dlq|poison|poison-dlq","reason":"...","depth":N,"oldest_age_seconds":S,"in_queue":Q,"left":L,"stored":K}
// depth: the store's entries not closed (open, left, replay-due) plus the
// messages still waiting in Service Bus (in_queue of them: arrived since
// the drain, or could not be stored); oldest_age_seconds: since the oldest
// of them reached the store (its StoredAt; for one still in Service Bus,
// since it was enqueued); left: of depth, left for a human; stored: how
// many this run drained into the store. A reason drained and closed within
// the run (a poison InvalidPayload, archived at once) logs depth 0 and
// stored K. A source with nothing logs one line with reason "" and depth 0.
// Each line arrives up to twice: from stdout, and from the invocation
// answer's Logs array (the host writes both as traces, the JSON as the
// message text, possibly behind a prefix; customDimensions is the fallback).
// Grouping by run_id, source and reason counts each line once.
//
// The age alert: the latest run of each source is its current state, so a
// reason that was cleared drops out at the next run instead of lingering
// for the window.
var deadLetterAgeQuery = '''
let stats = traces
| where message has "deadletter_stats"
| extend line = iff(message startswith "{", message, extract(@"(\{.*\})", 1, message))
| extend s = parse_json(line)
| where coalesce(tostring(s.msg), tostring(customDimensions.msg)) == "deadletter_stats"
| extend run_id = coalesce(tostring(s.run_id), tostring(customDimensions.run_id)),
         source = coalesce(tostring(s.source), tostring(customDimensions.source)),
         reason = coalesce(tostring(s.reason), tostring(customDimensions.reason)),
         depth = coalesce(tolong(s.depth), tolong(customDimensions.depth)),
         oldest_age_seconds = coalesce(todouble(s.oldest_age_seconds), todouble(customDimensions.oldest_age_seconds))
| summarize timestamp = min(timestamp), depth = max(depth), oldest_age_seconds = max(oldest_age_seconds) by run_id, source, reason;
stats
| summarize arg_max(timestamp, run_id) by source
| join kind=inner stats on run_id, source
| where depth > 0
| project timestamp, source, reason, depth, oldest_age_seconds
'''

// The count alerts: a row per source and reason that, in some run of the
// window, drained a message into the store (stored > 0: the message may
// have spent seconds in Service Bus, the line still counts it) or still
// holds entries that are not closed (depth > 0, store and Service Bus
// alike). A 15 minute window holds three runs of the default 5 minute
// schedule, so a line that reaches Application Insights late is still
// evaluated, and the alert resolves 15 minutes after the last such run.
var deadLetteredQuery = '''
let stats = traces
| where message has "deadletter_stats"
| extend line = iff(message startswith "{", message, extract(@"(\{.*\})", 1, message))
| extend s = parse_json(line)
| where coalesce(tostring(s.msg), tostring(customDimensions.msg)) == "deadletter_stats"
| extend run_id = coalesce(tostring(s.run_id), tostring(customDimensions.run_id)),
         source = coalesce(tostring(s.source), tostring(customDimensions.source)),
         reason = coalesce(tostring(s.reason), tostring(customDimensions.reason)),
         depth = coalesce(tolong(s.depth), tolong(customDimensions.depth)),
         stored = coalesce(tolong(s.stored), tolong(customDimensions.stored))
| summarize timestamp = min(timestamp), depth = max(depth), stored = max(stored) by run_id, source, reason;
stats
| where source in ("dlq", "poison-dlq")
| where stored > 0 or depth > 0
| summarize timestamp = max(timestamp), stored = sum(stored), depth = max(depth) by source, reason
| project timestamp, source, reason, stored, depth
'''

var poisonParkedQuery = '''
let stats = traces
| where message has "deadletter_stats"
| extend line = iff(message startswith "{", message, extract(@"(\{.*\})", 1, message))
| extend s = parse_json(line)
| where coalesce(tostring(s.msg), tostring(customDimensions.msg)) == "deadletter_stats"
| extend run_id = coalesce(tostring(s.run_id), tostring(customDimensions.run_id)),
         source = coalesce(tostring(s.source), tostring(customDimensions.source)),
         reason = coalesce(tostring(s.reason), tostring(customDimensions.reason)),
         depth = coalesce(tolong(s.depth), tolong(customDimensions.depth)),
         stored = coalesce(tolong(s.stored), tolong(customDimensions.stored))
| summarize timestamp = min(timestamp), depth = max(depth), stored = max(stored) by run_id, source, reason;
stats
| where source == "poison"
| where stored > 0 or depth > 0
| summarize timestamp = max(timestamp), stored = sum(stored), depth = max(depth) by source, reason
| project timestamp, source, reason, stored, depth
'''

// Every sweeper run logs at least one deadletter_stats line per source
// (depth 0 when empty). No line in three schedule periods (15 minutes at the
// default schedule) means the sweeper is not running or cannot log: a dead
// sweeper must not look like an empty dead-letter queue.
var sweeperHeartbeatQuery = '''
traces
| where message has "deadletter_stats"
| extend line = iff(message startswith "{", message, extract(@"(\{.*\})", 1, message))
| where coalesce(tostring(parse_json(line).msg), tostring(customDimensions.msg)) == "deadletter_stats"
| project timestamp, message
'''

// A failed OrderStatus invocation is a non-2xx answer: the host abandons the
// message and, after 5 deliveries, the broker dead-letters it.
var failedInvocationsQuery = '''
requests
| where operation_Name == "OrderStatus"
| where tobool(success) == false
| project timestamp, id, operation_Id, resultCode, duration, cloud_RoleInstance
'''

// A message the store could not take within the in-call budget, or that
// met an open circuit breaker, is scheduled again as a copy and answered
// 200: no failed invocation, no dead letter, so neither of those alerts
// sees an outage. The handler logs one JSON line per rescheduled message,
//   {"level":"WARN","msg":"message rescheduled: a copy is due later","rescheduled_id":"<copy>","reschedule_reason":"transient|circuit_open|order_not_found",...}
// on stdout and stderr (two traces), and the invocation's Logs line (text,
// without rescheduled_id). One row per copy: its id is unique per message
// and attempt.
var rescheduledQuery = '''
traces
| where message has "rescheduled_id"
| extend line = iff(message startswith "{", message, extract(@"(\{.*\})", 1, message))
| extend s = parse_json(line)
| extend rescheduled_id = coalesce(tostring(s.rescheduled_id), tostring(customDimensions.rescheduled_id)),
         reason = coalesce(tostring(s.reschedule_reason), tostring(customDimensions.reschedule_reason)),
         instance = coalesce(tostring(s.instance_id), tostring(customDimensions.instance_id))
| where isnotempty(rescheduled_id)
| summarize timestamp = min(timestamp), reason = take_any(reason), instance = take_any(instance) by rescheduled_id
| project timestamp, rescheduled_id, reason, instance
'''

// Freshness: how long a message waited from its enqueue to its 200 answer
// (lag_ms on each settled line, one line per call). Flex Consumption can
// take up to about two minutes to deliver the first message after scaling
// to zero (Azure/azure-functions-host #10706, Azure/Azure-Functions #2581);
// the in-call retry budget (5 s by default) and a
// rescheduled copy's first backoff (10 s) add a little more. The
// default 300 s lets one cold start and one failed attempt pass without a
// page; past it the tracking page is more than five minutes behind. At
// least 5 settled messages, so that one late message after a quiet hour is
// not a p95.
var freshnessQuery = '''
traces
| where message has "lag_ms"
| extend line = iff(message startswith "{", message, extract(@"(\{.*\})", 1, message))
| extend entry = parse_json(line)
| where isnotnull(entry.lag_ms)
| summarize settled = count(), p95_s = percentile(todouble(entry.lag_ms), 95) / 1000
| where settled >= 5
'''

// The log alerts are declared one by one: only the age alert measures a
// column (metricMeasureColumn); the others count rows, and a shared
// loop would have to pass null for it, which Bicep flags (BCP036, BCP321).
resource deadLetteredAlert 'Microsoft.Insights/scheduledQueryRules@2022-06-15' = {
  name: 'order-status-dead-lettered'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'order-status-dead-lettered'
    description: 'Messages were dead-lettered: the sweeper drained messages from the dead-letter queue of order-status (MaxDeliveryCountExceeded, TTLExpiredException) or of order-status-poison (parked messages that expired or failed 10 deliveries) into the dead-letter store, or entries from them are still open there. Runbook: ${runbookBaseUrl}/order-status-dead-lettered.md'
    severity: 2
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: deadLetteredQuery
          timeAggregation: 'Count'
          dimensions: [
            {
              name: 'source'
              operator: 'Include'
              values: [
                '*'
              ]
            }
            {
              name: 'reason'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
      customProperties: {
        runbook: '${runbookBaseUrl}/order-status-dead-lettered.md'
      }
    }
  }
}

resource poisonParkedAlert 'Microsoft.Insights/scheduledQueryRules@2022-06-15' = {
  name: 'order-status-poison-parked'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'order-status-poison-parked'
    description: 'The handler parked poison messages (InvalidPayload, UnknownSubject, InvalidTransition, RetryWindowExceeded, OrderNeverCreated) in order-status-poison: the sweeper drained them into the dead-letter store, or entries from them are still open there. Runbook: ${runbookBaseUrl}/order-status-poison-parked.md'
    severity: 2
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: poisonParkedQuery
          timeAggregation: 'Count'
          dimensions: [
            {
              name: 'source'
              operator: 'Include'
              values: [
                '*'
              ]
            }
            {
              name: 'reason'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
      customProperties: {
        runbook: '${runbookBaseUrl}/order-status-poison-parked.md'
      }
    }
  }
}

resource deadLetterAgeAlert 'Microsoft.Insights/scheduledQueryRules@2022-06-15' = {
  name: 'dead-letter-oldest-age'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'dead-letter-oldest-age'
    description: 'A dead-lettered or parked message has waited longer than the age threshold: the sweeper is not clearing it (a reason left for humans, or the sweeper is failing). Runbook: ${runbookBaseUrl}/dead-letter-oldest-age.md'
    severity: 2
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: deadLetterAgeQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'oldest_age_seconds'
          dimensions: [
            {
              name: 'source'
              operator: 'Include'
              values: [
                '*'
              ]
            }
            {
              name: 'reason'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: deadLetterAgeThresholdSeconds
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
      customProperties: {
        runbook: '${runbookBaseUrl}/dead-letter-oldest-age.md'
      }
    }
  }
}

resource sweeperHeartbeatAlert 'Microsoft.Insights/scheduledQueryRules@2022-06-15' = {
  name: 'dead-letter-sweeper-heartbeat'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'dead-letter-sweeper-heartbeat'
    description: 'No deadletter_stats line from the DeadLetterSweeper for 15 minutes (three schedule periods): the sweeper is not running, failing before it measures, or its logs do not arrive. Dead letters are neither replayed nor measured, and the age alert cannot fire. Runbook: ${runbookBaseUrl}/dead-letter-sweeper-heartbeat.md'
    severity: 2
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: sweeperHeartbeatQuery
          timeAggregation: 'Count'
          operator: 'LessThan'
          threshold: 1
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
      customProperties: {
        runbook: '${runbookBaseUrl}/dead-letter-sweeper-heartbeat.md'
      }
    }
  }
}

resource failedInvocationsAlert 'Microsoft.Insights/scheduledQueryRules@2022-06-15' = {
  name: 'order-status-failed-invocations'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'order-status-failed-invocations'
    description: 'OrderStatus invocations failed (non-2xx answers): messages are being abandoned and retried, and dead-lettered after 5 deliveries. Runbook: ${runbookBaseUrl}/order-status-failed-invocations.md'
    severity: 3
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: failedInvocationsQuery
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: failedInvocationsThreshold
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
      customProperties: {
        runbook: '${runbookBaseUrl}/order-status-failed-invocations.md'
      }
    }
  }
}

resource rescheduledAlert 'Microsoft.Insights/scheduledQueryRules@2022-06-15' = {
  name: 'order-status-rescheduled'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'order-status-rescheduled'
    description: 'OrderStatus is rescheduling messages instead of applying them: the order store keeps failing past the in-call budget, or an instance\'s circuit breaker is open. Updates are delayed (not lost); past the retry window they are parked RetryWindowExceeded. Runbook: ${runbookBaseUrl}/order-status-rescheduled.md'
    severity: 2
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: rescheduledQuery
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: rescheduledThreshold
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
      customProperties: {
        runbook: '${runbookBaseUrl}/order-status-rescheduled.md'
      }
    }
  }
}

resource freshnessAlert 'Microsoft.Insights/scheduledQueryRules@2022-06-15' = {
  name: 'order-status-freshness'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'order-status-freshness'
    description: 'The p95 of the time from enqueue to settlement of order-status messages is above the freshness threshold: the tracking page is behind (cold starts, retries, a backlog). Runbook: ${runbookBaseUrl}/order-status-freshness.md'
    severity: 3
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: freshnessQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'p95_s'
          operator: 'GreaterThan'
          threshold: freshnessP95ThresholdSeconds
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
      customProperties: {
        runbook: '${runbookBaseUrl}/order-status-freshness.md'
      }
    }
  }
}

// The operations workbook: queue depth, dead letters by source and reason
// (depth, oldest age, stored per hour, actions), handler results and duration.
resource workbook 'Microsoft.Insights/workbooks@2022-04-01' = {
  name: guid(resourceGroup().id, 'orderstatus-operations-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'Order status operations'
    category: 'workbook'
    sourceId: appInsights.id
    serializedData: replace(replace(loadTextContent('workbook.json'), '__SERVICE_BUS_NAMESPACE_ID__', namespace.id), '__APPLICATION_INSIGHTS_ID__', appInsights.id)
  }
}

output actionGroupId string = actionGroup.id
output workbookId string = workbook.id
output alertNames array = concat(map(metricAlerts, a => a.name), map(storageMetricAlerts, a => a.name), [
  deadLetteredAlert.name
  poisonParkedAlert.name
  stalledConsumerAlert.name
  resourceHealthAlert.name
  deadLetterAgeAlert.name
  sweeperHeartbeatAlert.name
  failedInvocationsAlert.name
  rescheduledAlert.name
  freshnessAlert.name
])
