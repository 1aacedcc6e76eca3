package contract

import (
	"strings"
	"testing"
	"time"
)

func TestUpdateValidate(t *testing.T) {
	for _, tc := range []struct {
		u    Update
		want string
	}{
		{Update{Password: "x"}, ""},
		{Update{Port: 8081, Password: "x"}, ""},
		{Update{Port: 70000, Password: "x"}, "Update.Port 70000"},
		{Update{}, "Update.Password: empty"},
	} {
		err := tc.u.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.u, err, tc.want)
		}
	}
	if (&Update{}).PortOrDefault() != DefaultUpdatePort {
		t.Error("PortOrDefault of an unset port")
	}
	c := InitConfig{Update: &Update{}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Update.Password") {
		t.Errorf("InitConfig.Validate with an empty Update: %v", err)
	}
}

func TestParseReadyDeadline(t *testing.T) {
	for in, want := range map[string]time.Duration{"": DefaultReadyDeadline, "5s": 5 * time.Second, "0s": 0, "-1s": 0, "1h": 0, "soon": 0} {
		got, err := ParseReadyDeadline(in)
		if want == 0 && (err == nil || !strings.Contains(err.Error(), HeaderDeadline)) || want != 0 && got != want {
			t.Errorf("ParseReadyDeadline(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
