// Package deps pins the chosen third-party modules in go.mod while the
// packages that use them are written. It is imported by nothing and will be
// removed once every module here has a real importer.
package deps

import (
	_ "github.com/Azure/azure-sdk-for-go/sdk/azcore"
	_ "github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	_ "github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	_ "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
)
