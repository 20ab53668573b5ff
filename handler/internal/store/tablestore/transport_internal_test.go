package tablestore

import (
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

func TestClientOptionsTransport(t *testing.T) {
	co := clientOptions(nil)
	c, ok := co.Transport.(*http.Client)
	if !ok {
		t.Fatalf("default Transport is %T, want *http.Client", co.Transport)
	}
	tr, ok := c.Transport.(*http.Transport)
	if !ok || tr.MaxIdleConnsPerHost != MaxIdleConnsPerHost || tr.TLSClientConfig == nil || tr.Proxy == nil {
		t.Fatalf("default transport = %+v, want %d idle connections per host, TLS config, proxy from the environment", c.Transport, MaxIdleConnsPerHost)
	}
	if clientOptions(nil).Transport == co.Transport {
		t.Error("two stores share one transport; want one each")
	}
	mine := &http.Client{}
	if got := clientOptions(&Options{ClientOptions: &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: mine}}}).Transport; got != mine {
		t.Errorf("Transport = %v, want the caller's", got)
	}
}
