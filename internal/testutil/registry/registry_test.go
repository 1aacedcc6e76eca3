package registry

import (
	"slices"
	"testing"
)

// Requests and BlobGets read Distribution's access log (the combined log
// format, as v3 writes it): method, path, status, bytes and user agent.
func TestRequests(t *testing.T) {
	r := &Registry{log: &logBuffer{}}
	r.log.Write([]byte(`time="2026-11-29T10:09:52Z" level=info msg="response completed" http.request.method=GET
127.0.0.1 - - [29/Nov/2026:10:09:52 +0000] "HEAD /v2/bench/big/manifests/stable HTTP/2.0" 401 152 "" "nvpull"
127.0.0.1 - - [29/Nov/2026:10:09:52 +0000] "GET /v2/bench/big/blobs/sha256:` + hex64 + ` HTTP/2.0" 206 4199 "" "nvpull"
127.0.0.1 - - [29/Nov/2026:10:09:53 +0000] "PUT /v2/bench/big/manifests/stable HTTP/1.1" 201 0 "" "nvboot"
`))
	want := []Request{
		{Method: "HEAD", Path: "/v2/bench/big/manifests/stable", Status: 401, Bytes: 152, Agent: "nvpull"},
		{Method: "GET", Path: "/v2/bench/big/blobs/sha256:" + hex64, Status: 206, Bytes: 4199, Agent: "nvpull"},
		{Method: "PUT", Path: "/v2/bench/big/manifests/stable", Status: 201, Bytes: 0, Agent: "nvboot"},
	}
	if got := r.Requests(); !slices.Equal(got, want) {
		t.Errorf("Requests:\n%+v\nwant\n%+v", got, want)
	}
	if got := r.BlobGets(); len(got) != 1 || got[0] != (BlobGet{Digest: "sha256:" + hex64, Status: 206, Bytes: 4199}) {
		t.Errorf("BlobGets: %+v", got)
	}
}

const hex64 = "41a774d8ac66f588ad0941ce40ee968a13e2e56d2384b3e6d9b15826ca246d42"
