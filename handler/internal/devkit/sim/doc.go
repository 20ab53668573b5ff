// Package sim is the simulation test of the whole handler: schedules
// generated from seeds drive the real handler binary through the
// development host against Azurite, with a fault proxy between the handler
// and the storage, and the product's invariants are checked after each.
// The simulation lives in the package's tests: Generate and GenerateOutage
// turn a seed into a Schedule (messages, faults, scale-out),
// deterministically; Run plays it and records an Observation; Check judges
// the Observation against its Schedule. The package itself holds what
// make bench reads too: the handler's answers from its log (ParseAnswers)
// and what stale caches cost (CacheCost).
//
// TestSimulation runs SIM_SCHEDULES schedules (default 90, 20 with -short)
// from SIM_FIRST_SEED (default 1) and SIM_OUTAGES outage schedules of each
// kind (default 3, 1 with -short), SIM_PARALLEL at once (default 8);
// SIM_SEED=<n>, or SIM_SCHEDULES=0 SIM_OUTAGE_SEED=<n>, replays one seed.
package sim
