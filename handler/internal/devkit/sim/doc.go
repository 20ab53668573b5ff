// Package sim is the simulation test of the whole handler: randomised
// schedules, each generated from a seed, drive the real handler binary
// through the development host (devhost) against Azurite, with a fault
// proxy (faultproxy) between the handler and the storage, and the
// product's invariants are checked after every schedule.
//
// It has three parts, each usable on its own:
//   - Generate turns a seed into a Schedule: the messages to send and when
//     (valid events, producer reordering, duplicate sends, late replays,
//     poison, payment timeouts racing Paid) and the faults to inject
//     (storage outages shorter and longer than the retry budget, lost
//     write answers, the handler killed between a write and its answer,
//     storage latency above the lock duration with lock renewal off) and
//     the scale-out (1 to 4 instances, instances added, removed gracefully
//     or killed during the run, a short session idle timeout so that
//     sessions move between instances with stale caches), and, in some
//     schedules, an unpaid order whose producer never schedules its check
//     and a paid one whose producer cancels it. GenerateOutage makes the
//     outage schedules: the store gone for minutes on a 30x broker clock,
//     shorter or longer than the retry window, with every kind of order
//     (late Created included). Both are pure and deterministic.
//   - Run plays a Schedule against a real handler, replays what the broker
//     dead-lettered as the sweeper would, and records an Observation: the
//     rows as stored, every successful write seen on the wire (from the
//     request bodies the fault proxy forwarded, ordered by their ETag
//     conditions), the handler's answers (from its log), the poison queue
//     and the dead-letter queue; and what stale caches cost (CacheCost:
//     session moves, ETag conflicts, the extra round trips of calls that
//     began from a stale cache).
//   - Check judges an Observation against its Schedule. It is pure, and
//     tested with a planted violation of each invariant.
//
// TestSimulation runs SIM_SCHEDULES schedules (default 200, 20 with
// -short) from seed SIM_FIRST_SEED (default 1), and SIM_OUTAGES outage
// schedules of each kind (default 3, 1 with -short), SIM_PARALLEL at once
// (default 6); SIM_SEED=<n> runs only seed n, SIM_SCHEDULES=0
// SIM_OUTAGE_SEED=<n> only the outage pair of seed n, which is how a
// failure is replayed. Run fast-forwards the broker clock over scheduled
// messages (rescheduled copies, payment timeouts) when nothing else runs. A replay runs the same schedule and faults; the timing, and so
// the interleaving, may differ.
package sim
