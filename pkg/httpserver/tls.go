package httpserver

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// reloadCheck is how often, at most, a handshake looks whether the
// certificate or key file changed.
const reloadCheck = time.Second

// certificateFiles serves a certificate from a PEM pair and loads it again
// when either file changes (size or modification time), so a renewed
// certificate is served without a restart. A pair that fails to load (a
// half-written renewal) keeps the previous certificate in service; the
// failure is kept for Stats and tried again at the next check.
type certificateFiles struct {
	certFile, keyFile string
	now               func() time.Time

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     [2]fileStamp
	checked   time.Time
	reloads   uint64
	lastError string
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

func newCertificateFiles(certFile, keyFile string) (*certificateFiles, error) {
	f := &certificateFiles{certFile: certFile, keyFile: keyFile, now: time.Now}
	stamp, err := f.stamps()
	if err != nil {
		return nil, err
	}
	if err := f.load(stamp); err != nil {
		return nil, err
	}
	f.checked = f.now()
	return f, nil
}

func (f *certificateFiles) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, name := range []string{f.certFile, f.keyFile} {
		info, err := os.Stat(name)
		if err != nil {
			return out, fmt.Errorf("httpserver: TLS file: %w", err)
		}
		out[i] = fileStamp{size: info.Size(), modTime: info.ModTime()}
	}
	return out, nil
}

// load reads the pair; its errors name the files, never their contents.
func (f *certificateFiles) load(stamp [2]fileStamp) error {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("httpserver: TLS certificate %s and key %s: %w", f.certFile, f.keyFile, err)
	}
	f.cert, f.stamp = &cert, stamp
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (f *certificateFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.now(); now.Sub(f.checked) >= reloadCheck {
		f.checked = now
		stamp, err := f.stamps()
		switch {
		case err != nil:
			f.lastError = err.Error()
		case stamp != f.stamp:
			if err := f.load(stamp); err != nil {
				f.lastError = err.Error()
			} else {
				f.reloads++
				f.lastError = ""
			}
		}
	}
	return f.cert, nil
}
