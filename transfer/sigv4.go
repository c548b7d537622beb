package transfer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// SigV4Transport signs every request with AWS Signature Version 4 in the
// Authorization header, as S3-compatible servers want it. GCS accepts the
// same signature when made with an HMAC key of a service account.
//
// The payload is not hashed: requests carry x-amz-content-sha256:
// UNSIGNED-PAYLOAD unless the caller set that header to the body's hash
// already. Integrity of bodies is the caller's business (Multipart sends
// Content-MD5, which is signed like every other header the request carries).
//
// SigV4Transport is safe for concurrent use; its fields must not change once
// it is in use.
type SigV4Transport struct {
	AccessKey string
	SecretKey string
	Region    string            // "us-east-1" if empty
	Service   string            // "s3" if empty
	Base      http.RoundTripper // http.DefaultTransport if nil
}

var _ http.RoundTripper = (*SigV4Transport)(nil)

const (
	sigV4Algorithm  = "AWS4-HMAC-SHA256"
	sigV4TimeFormat = "20060102T150405Z"
	unsignedPayload = "UNSIGNED-PAYLOAD"
)

// sigV4Unsigned are headers left out of the signature: the transport or a
// proxy may add, drop or rewrite them on the way.
var sigV4Unsigned = map[string]bool{
	"authorization":     true,
	"user-agent":        true,
	"accept-encoding":   true,
	"connection":        true,
	"expect":            true,
	"transfer-encoding": true,
	"x-amzn-trace-id":   true,
}

// RoundTrip signs a copy of req and sends it with Base. req itself is not
// modified.
func (t *SigV4Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.AccessKey == "" || t.SecretKey == "" {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, errors.New("sigv4: AccessKey and SecretKey must be set")
	}
	signed := req.Clone(req.Context())
	t.sign(signed, time.Now())
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(signed)
}

// sign adds x-amz-date, x-amz-content-sha256 (if missing) and Authorization
// to r, signing for the instant now.
func (t *SigV4Transport) sign(r *http.Request, now time.Time) {
	region, service := t.Region, t.Service
	if region == "" {
		region = "us-east-1"
	}
	if service == "" {
		service = "s3"
	}
	stamp := now.UTC().Format(sigV4TimeFormat)
	day := stamp[:8]
	r.Header.Set("X-Amz-Date", stamp)
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = unsignedPayload
		r.Header.Set("X-Amz-Content-Sha256", payload)
	}

	names, headers := canonicalHeaders(r)
	creq := strings.Join([]string{
		r.Method,
		canonicalURI(r.URL),
		canonicalQuery(r.URL.RawQuery),
		headers,
		names,
		payload,
	}, "\n")
	scope := day + "/" + region + "/" + service + "/aws4_request"
	toSign := sigV4Algorithm + "\n" + stamp + "\n" + scope + "\n" + hexSHA256(creq)

	key := hmacSHA256([]byte("AWS4"+t.SecretKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, service)
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))

	r.Header.Set("Authorization", sigV4Algorithm+
		" Credential="+t.AccessKey+"/"+scope+
		", SignedHeaders="+names+
		", Signature="+sig)
}

// canonicalURI is the path of u with each segment URI-encoded once, from
// the path as it goes on the wire: a segment already escaped there is
// decoded first, so that the server, which encodes what it received, gets
// the same string.
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if dec, err := url.PathUnescape(s); err == nil {
			s = dec
		}
		segs[i] = uriEncode(s, false)
	}
	return strings.Join(segs, "/")
}

// canonicalQuery is the raw query with every name and value URI-encoded,
// sorted by name then value. A parameter without a value ("?uploads")
// becomes "uploads=".
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	type param struct{ k, v string }
	var params []param
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if dec, err := url.QueryUnescape(k); err == nil {
			k = dec
		}
		if dec, err := url.QueryUnescape(v); err == nil {
			v = dec
		}
		params = append(params, param{uriEncode(k, false), uriEncode(v, false)})
	}
	sort.Slice(params, func(i, j int) bool {
		if params[i].k != params[j].k {
			return params[i].k < params[j].k
		}
		return params[i].v < params[j].v
	})
	var b strings.Builder
	for i, p := range params {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k + "=" + p.v)
	}
	return b.String()
}

// canonicalHeaders returns the signed header names ("host;x-amz-date") and
// the canonical header block: every header of r but sigV4Unsigned, plus
// host, lowercased and sorted, values trimmed with inner runs of spaces
// collapsed, one "name:value\n" line each.
func canonicalHeaders(r *http.Request) (names, block string) {
	vals := map[string][]string{}
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	vals["host"] = []string{host}
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if sigV4Unsigned[lk] || lk == "host" {
			continue
		}
		vals[lk] = append(vals[lk], vs...)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		trimmed := make([]string, len(vals[k]))
		for i, v := range vals[k] {
			trimmed[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(strings.Join(trimmed, ","))
		b.WriteByte('\n')
	}
	return strings.Join(keys, ";"), b.String()
}

// uriEncode percent-encodes every byte of s but the unreserved characters
// of RFC 3986 (A-Z a-z 0-9 - _ . ~), with upper-case hex digits, as
// Signature Version 4 defines it; '/' is kept when keepSlash is set. The
// result is also a valid escaped URL path or query component, so
// Multipart builds its URLs with it.
func uriEncode(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/' && keepSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func hexSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
