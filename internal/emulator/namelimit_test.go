package emulator

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"google.golang.org/api/googleapi"
)

// Names over 1024 bytes are refused with 400, as GCS does, by every call
// that makes an object; a name of 1024 bytes is taken.
func TestObjectNameLimit(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, nil)
	c := newClient(t, s, false)
	b := c.Bucket(testBucket)
	put := func(name string, chunk int) error {
		w := b.Object(name).NewWriter(ctx)
		w.ChunkSize = chunk
		if _, err := w.Write([]byte("data")); err != nil {
			return err
		}
		return w.Close()
	}
	is400 := func(err error) bool {
		var ge *googleapi.Error
		return errors.As(err, &ge) && ge.Code == http.StatusBadRequest
	}
	fits := strings.Repeat("a", MaxObjectName)
	long := strings.Repeat("é", MaxObjectName/2) + "x" // 1025 bytes, 513 characters
	if err := put(fits, 0); err != nil {
		t.Fatalf("upload of a 1024-byte name: %v", err)
	}
	for _, chunk := range []int{0, 256 << 10} { // multipart, resumable
		if err := put(long, chunk); !is400(err) {
			t.Errorf("upload (chunk size %d) of a 1025-byte name: %v, want 400", chunk, err)
		}
	}
	if _, err := b.Object(long).CopierFrom(b.Object(fits)).Run(ctx); !is400(err) {
		t.Errorf("copy to a 1025-byte name: %v, want 400", err)
	}
	if _, err := b.Object(long).ComposerFrom(b.Object(fits)).Run(ctx); !is400(err) {
		t.Errorf("compose into a 1025-byte name: %v, want 400", err)
	}
	if _, err := b.Object(long).Attrs(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Errorf("the 1025-byte name exists after the refusals: %v", err)
	}
}
