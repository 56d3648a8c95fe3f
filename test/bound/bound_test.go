package bound

import (
	"testing"
	"time"
)

func TestScaled(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
	}{
		{"", 10 * time.Second},
		{"1", 10 * time.Second},
		{"2.5", 25 * time.Second},
	} {
		t.Setenv(ScaleEnv, tc.env)
		if got := Scaled(10 * time.Second); got != tc.want {
			t.Errorf("%s=%q: Scaled(10s) = %s, want %s", ScaleEnv, tc.env, got, tc.want)
		}
	}
	for _, bad := range []string{"0.5", "two", "-1"} {
		t.Run(bad, func(t *testing.T) {
			t.Setenv(ScaleEnv, bad)
			defer func() {
				if recover() == nil {
					t.Errorf("%s=%q: no panic; a typo would change every bound", ScaleEnv, bad)
				}
			}()
			Scaled(time.Second)
		})
	}
}
