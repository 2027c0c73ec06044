import Testing
import UVLoop

@Suite("UVLoop UVError")
struct UVErrorTests {
    @Test func namesAndMessagesComeFromLibuv() {
        let error = UVError(code: UVError.invalidArgumentCode, operation: "uv_timer_start")
        #expect(error.name == "EINVAL")
        #expect(error.message == "invalid argument")
        #expect(error.description == "uv_timer_start: EINVAL (invalid argument)")
        let busy = UVError(code: UVError.busyCode, operation: "uv_loop_close")
        #expect(busy.name == "EBUSY")
        #expect(busy != error)
    }

    /// `uv_err_name`/`uv_strerror` malloc a string for codes they do not know and never free it;
    /// `UVError` uses the `_r` variants, so this does not leak (checked by `make check-memory`).
    @Test func unknownCodesAreNamedWithoutLeaking() {
        let error = UVError(code: -9_999, operation: "test")
        #expect(error.name == "Unknown system error -9999")
        #expect(error.message == "Unknown system error -9999")
    }

    @Test func isEquatableAndHashable() {
        let first = UVError(code: UVError.busyCode, operation: "uv_loop_close")
        let second = UVError(code: UVError.busyCode, operation: "uv_loop_close")
        #expect(first == second)
        #expect(Set([first, second]).count == 1)
    }
}
