package cost

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/orderstatus/orderstatus/handler/internal/devkit/devhost/ncrontab"
)

// ReadParams reads the deployment's parameters from the repository at root
// as `azd up` deploys them: infra/main.parameters.json, else infra/main.bicep's
// defaults, and host.json's logging. hoursPerMonth spans the sweeper's month.
func ReadParams(root string, hoursPerMonth float64) (Params, error) {
	b, err := os.ReadFile(filepath.Join(root, "infra", "main.bicep"))
	if err != nil {
		return Params{}, fmt.Errorf("cost: %w", err)
	}
	bicep := string(b)
	pj, err := os.ReadFile(filepath.Join(root, "infra", "main.parameters.json"))
	if err != nil {
		return Params{}, fmt.Errorf("cost: %w", err)
	}
	var par Params
	mem, err := deployedInt(pj, bicep, "instanceMemoryMB")
	if err != nil {
		return Params{}, err
	}
	par.InstanceMemoryMB = mem
	if n, err := deployedInt(pj, bicep, "alwaysReadyInstances"); err == nil {
		par.AlwaysReadyInstances = n
	}
	sched, err := bicepString(bicep, "deadLetterSweepSchedule")
	if err != nil {
		return Params{}, err
	}
	if par.SweepsPerMonth, err = RunsPerMonth(sched, hoursPerMonth); err != nil {
		return Params{}, err
	}
	h, err := os.ReadFile(filepath.Join(root, "host.json"))
	if err != nil {
		return Params{}, fmt.Errorf("cost: %w", err)
	}
	if par.Host, err = ParseHostLogging(h); err != nil {
		return Params{}, err
	}
	return par, nil
}

// deployedInt is the value azd deploys for an int parameter: the
// `${VAR=default}` default (or literal), else the Bicep default.
func deployedInt(parametersJSON []byte, bicep, name string) (int, error) {
	var pf struct {
		Parameters map[string]struct {
			Value any `json:"value"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(parametersJSON, &pf); err != nil {
		return 0, fmt.Errorf("cost: infra/main.parameters.json: %w", err)
	}
	p, ok := pf.Parameters[name]
	if !ok {
		return bicepInt(bicep, name)
	}
	switch v := p.Value.(type) {
	case float64:
		return int(v), nil
	case string:
		if m := azdDefault.FindStringSubmatch(v); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil {
				return n, nil
			}
		}
		return 0, fmt.Errorf("cost: infra/main.parameters.json: %s = %q: want a number or ${VAR=<number>}", name, v)
	}
	return 0, fmt.Errorf("cost: infra/main.parameters.json: %s: want a number or ${VAR=<number>}", name)
}

var azdDefault = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*=(-?\d+)\}$`)

func bicepParam(bicep, name, typ string) (string, error) {
	re := regexp.MustCompile(`(?m)^param\s+` + regexp.QuoteMeta(name) + `\s+` + typ + `\s*=\s*(.+?)\s*$`)
	m := re.FindStringSubmatch(bicep)
	if m == nil {
		return "", fmt.Errorf("cost: infra/main.bicep has no default for param %s %s", name, typ)
	}
	return m[1], nil
}

func bicepInt(bicep, name string) (int, error) {
	v, err := bicepParam(bicep, name, "int")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("cost: param %s = %s: not a literal integer", name, v)
	}
	return n, nil
}

func bicepString(bicep, name string) (string, error) {
	v, err := bicepParam(bicep, name, "string")
	if err != nil {
		return "", err
	}
	if len(v) < 2 || v[0] != '\'' || v[len(v)-1] != '\'' {
		return "", fmt.Errorf("cost: param %s = %s: not a literal string", name, v)
	}
	return v[1 : len(v)-1], nil
}

// RunsPerMonth counts the runs of an NCRONTAB schedule in a month of
// hoursPerMonth hours (from a fixed Monday midnight, UTC).
func RunsPerMonth(schedule string, hoursPerMonth float64) (float64, error) {
	s, err := ncrontab.Parse(schedule)
	if err != nil {
		return 0, fmt.Errorf("cost: sweeper schedule: %w", err)
	}
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Duration(hoursPerMonth * float64(time.Hour)))
	n := 0
	for t := s.Next(start.Add(-time.Second)); !t.IsZero() && t.Before(end); t = s.Next(t) {
		n++
		if n > 50_000_000 {
			return 0, fmt.Errorf("cost: sweeper schedule %q fires more than 50M times a month", schedule)
		}
	}
	return float64(n), nil
}
