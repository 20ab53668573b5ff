package deadletter_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/broker"
	"github.com/orderstatus/orderstatus/handler/internal/deadletter"
	"github.com/orderstatus/orderstatus/handler/internal/dlops"
	"github.com/orderstatus/orderstatus/handler/internal/dlstore"
)

// killedAtSend ends the goroutine that sends (a CLI killed between its
// claim and its send): nothing is sent, nothing released.
type killedAtSend struct{ deadletter.Broker }

func (killedAtSend) Send(context.Context, string, broker.Message) error {
	runtime.Goexit()
	return nil
}

// storeArchived stores a parked o-1:1 that the policy archives.
func storeArchived(t *testing.T, f *fixture) {
	t.Helper()
	f.park(t, "o-1:1", "InvalidPayload")
	f.run(t, f.sweeper(deadletter.Options{}))
	if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.Archived {
		t.Fatalf("entry is %s, want archived", e.State)
	}
}

// storeLeft stores a parked o-1:1 that the policy leaves for a human.
func storeLeft(t *testing.T, f *fixture) {
	t.Helper()
	f.park(t, "o-1:1", "InvalidTransition")
	f.run(t, f.sweeper(deadletter.Options{}))
	if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.Left {
		t.Fatalf("entry is %s, want left", e.State)
	}
}

// fixedBody is an operator's correction the contract accepts for o-1.
var fixedBody = []byte(`{"orderId":"o-1","status":"Created","sequence":1,"occurredAt":"2026-11-29T10:00:00Z"}`)

// nothingHappensLater: once any claim has timed out, a sweep neither sends
// the entry nor records a replay, and the entry is back as it was.
func nothingHappensLater(t *testing.T, f *fixture, want dlstore.State) {
	t.Helper()
	f.clk.Advance(deadletter.DefaultClaimTimeout + time.Minute)
	f.run(t, f.sweeper(deadletter.Options{}))
	for id, m := range f.queued(t) {
		t.Errorf("the timer sent %s with body %s: an action the operator saw fail happened later", id, m.Body)
	}
	if a := f.actions(t); a["replayed"]+a["resubmitted"] != 0 {
		t.Errorf("audit actions %v: a replay was recorded for one that never went out", a)
	}
	if e := f.byMessage(t)["o-1:1:parked"]; e.State != want || e.ClaimedBy != "" {
		t.Errorf("entry is %s claimed by %q, want %s and unclaimed", e.State, e.ClaimedBy, want)
	}
}

// TestAFailedReplayOfAnArchivedEntryIsReleasedNotFinished: a replay by
// hand of an archived entry whose send fails gives it back archived at
// once, with or without a corrected body, and no later sweep sends it.
func TestAFailedReplayOfAnArchivedEntryIsReleasedNotFinished(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
	}{{"corrected", fixedBody}, {"stored body", nil}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			storeArchived(t, f)
			s := deadletter.New(failingSend{f.mb}, f.store, f.options(deadletter.Options{}))
			if _, err := ops(s).Act(f.ctx, deadletter.ActionReplay, "o-1:1", &dlops.Edit{Body: c.body}, "cli:ana"); err == nil {
				t.Fatal("replay with the send failing succeeded")
			}
			if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.Archived || e.ClaimedBy != "" {
				t.Errorf("after the failed send the entry is %s claimed by %q, want archived and unclaimed", e.State, e.ClaimedBy)
			}
			if a := f.actions(t); a["archived"] != 1 {
				t.Errorf("audit actions %v: the release wrote an audit entry", a)
			}
			nothingHappensLater(t, f, dlstore.Archived)
		})
	}
}

// TestACorrectedReplayKilledBeforeItsSendIsReleasedNotFinished: a CLI
// killed between the claim and the send of a corrected replay leaves a
// claim that a sweep, once it times out, gives back to the state it was
// claimed from, never sending the stored body in the correction's place.
func TestACorrectedReplayKilledBeforeItsSendIsReleasedNotFinished(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(*testing.T, *fixture)
		want  dlstore.State
	}{{"archived", storeArchived, dlstore.Archived}, {"left", storeLeft, dlstore.Left}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.setup(t, f)
			s := deadletter.New(killedAtSend{f.mb}, f.store, f.options(deadletter.Options{}))
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = ops(s).Act(f.ctx, deadletter.ActionReplay, "o-1:1", &dlops.Edit{Body: fixedBody}, "cli:ana")
			}()
			<-done
			if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.ReplayDue {
				t.Fatalf("the killed replay left the entry %s, want its claim (replay-due)", e.State)
			}
			// Once the claim has timed out a dry run plans no replay of it.
			f.clk.Advance(deadletter.DefaultClaimTimeout + time.Second)
			rep, err := ops(f.sweeper(deadletter.Options{})).DryRun(f.ctx)
			if err != nil || rep.Counts[deadletter.ActionReplay] != 0 {
				t.Errorf("dry run: %v, counts %v; want no replay", err, rep.Counts)
			}
			nothingHappensLater(t, f, c.want)
			h := f.history(t, "o-1")
			if last := h[len(h)-1]; last.Action != deadletter.AuditReleased || last.From != dlstore.ReplayDue || last.To != c.want ||
				last.NewMessageID != "o-1:1:replay:1" || last.Actor != "sweeper" {
				t.Errorf("last audit entry %+v; want the release recorded (its outcome unknown), naming o-1:1:replay:1", last)
			}
		})
	}
}

// TestAStaleClaimOfTheStoredBodyIsStillFinished: a replay of the stored
// body killed before its send is finished by the timer (the same content).
func TestAStaleClaimOfTheStoredBodyIsStillFinished(t *testing.T) {
	f := newFixture(t)
	storeLeft(t, f)
	s := deadletter.New(killedAtSend{f.mb}, f.store, f.options(deadletter.Options{}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = ops(s).Act(f.ctx, deadletter.ActionReplay, "o-1:1", nil, "cli:ana")
	}()
	<-done
	f.clk.Advance(deadletter.DefaultClaimTimeout + time.Minute)
	f.run(t, f.sweeper(deadletter.Options{}))
	if m, ok := f.queued(t)["o-1:1:replay:1"]; !ok || string(m.Body) != "body of o-1:1" {
		t.Errorf("the timer did not finish the stored body's replay: %+v (found %v)", m, ok)
	}
	if e := f.byMessage(t)["o-1:1:parked"]; e.State != dlstore.Replayed {
		t.Errorf("entry is %s, want replayed", e.State)
	}
}
