package funcapp

import "testing"

// TestDisabledBy: the kill switch as the Functions host reads it.
func TestDisabledBy(t *testing.T) {
	tests := []struct {
		name     string
		settings Settings
		want     bool
	}{
		{"unset", Settings{}, false},
		{"true", Settings{"AzureWebJobs.OrderStatus.Disabled": "true"}, true},
		{"True, any case of the name", Settings{"azurewebjobs.orderstatus.disabled": "True"}, true},
		{"1", Settings{"AzureWebJobs.OrderStatus.Disabled": "1"}, true},
		{"the Linux form", Settings{"AzureWebJobs_OrderStatus_Disabled": "true"}, true},
		{"false", Settings{"AzureWebJobs.OrderStatus.Disabled": "false"}, false},
		{"0", Settings{"AzureWebJobs.OrderStatus.Disabled": "0"}, false},
		{"yes is not a value the host takes", Settings{"AzureWebJobs.OrderStatus.Disabled": "yes"}, false},
		{"another function", Settings{"AzureWebJobs.GetOrder.Disabled": "true"}, false},
		{"a prefix of the name", Settings{"AzureWebJobs.Order.Disabled": "true"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := DisabledBy(tt.settings, "OrderStatus"); got != tt.want {
				t.Errorf("disabledBy(%v) = %t, want %t", tt.settings, got, tt.want)
			}
		})
	}
}
