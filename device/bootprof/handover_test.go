package bootprof

import (
	"strings"
	"testing"
	"time"
)

func TestFindHandover(t *testing.T) {
	tests := []struct {
		name string
		kmsg string
		want time.Duration
		ok   bool
	}{
		{"root disk", "6,1,0,-;Linux version 6.1\n6,300,812345,-;Run /sbin/nvinit as init process\n6,301,812400,-;  with arguments:\n", 812345 * time.Microsecond, true},
		{"initramfs", "6,290,700001,-;Run /sbin/nvinit as init process\n", 700001 * time.Microsecond, true},
		{"another init (a container's host)", "6,290,700001,-;Run /sbin/init as init process\n", 0, false},
		{"continuation fields", "6,290,42,c,more;Run /sbin/nvinit as init process\n", 42 * time.Microsecond, true},
		{"absent", "6,1,0,-;Linux version 6.1\n", 0, false},
		{"malformed time", "6,290,x,-;Run /sbin/nvinit as init process\n", 0, false},
		{"no header", "Run /sbin/nvinit as init process\n", 0, false},
		{"syslog(2)'s lines", "<6>[    0.000000] Linux version 6.1\n<6>[    0.055639] Run /sbin/nvinit as init process\n<6>[    0.055645]   with arguments:\n", 55639 * time.Microsecond, true},
		{"syslog(2)'s, seconds", "<6>[   12.000001] Run /sbin/nvinit as init process\n", 12*time.Second + time.Microsecond, true},
		{"syslog(2)'s without a time", "<6>Run /sbin/nvinit as init process\n", 0, false},
		{"syslog(2)'s, a short fraction", "<6>[    0.0556] Run /sbin/nvinit as init process\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := findRecords(strings.NewReader(tt.kmsg), handoverText("/sbin/nvinit"))[0]
			if got != tt.want || ok != tt.ok {
				t.Fatalf("the handover at %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestFindRecords(t *testing.T) {
	kmsg := "6,1,0,-;Linux version 6.1\n6,300,812345,-;Run /sbin/nvinit as init process\n14,301,812400,-;nvinit: tsc 99\n14,302,900000,-;nvinit: tsc 99\n"
	got := findRecords(strings.NewReader(kmsg), "Run /sbin/nvinit as init process", "nvinit: tsc 99", "absent")
	if len(got) != 2 || got[0] != 812345*time.Microsecond || got[1] != 812400*time.Microsecond {
		t.Fatalf("findRecords = %v", got)
	}
}
