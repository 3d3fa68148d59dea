//! Backend-generic behaviour tests of cubert, written once and instantiated by every
//! backend.
//!
//! Each test is a generic function `pub fn name<B: TestBackend>()` in a module grouped by
//! concern. A backend implements [`TestBackend`] on a local unit struct in its test crate
//! and expands [`testgen!`] there, which gives one `#[test]` per suite function, named
//! `module::name`:
//!
//! ```ignore
//! struct Cpu;
//! impl cubert_test_suite::TestBackend for Cpu { /* fresh clients, kernel hooks */ }
//! cubert_test_suite::testgen!(Cpu);
//! // A backend that needs hardware the CI lacks:
//! cubert_test_suite::testgen!(Cuda, ignore = "needs a CUDA device");
//! ```
//!
//! Every test asserts bytes, shapes, counts or an error variant. Tests that need two
//! devices say so on standard error and return when the backend has one.
//!
//! Long-running tests (a million model operations, ten million alloc/free cycles, a long
//! multi-device stress) are listed apart: [`testgen!`] puts them in a `long` module and marks
//! them `#[ignore = "long: ..."]`, so run them in release mode with
//! `cargo test --release -p <backend crate> --test behaviour -- --ignored long::` (or
//! `scripts/reliability-long`). See `docs/reliability.md`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// Defines `$threaded` and `$inline`, which run `$body::<B>(mode)` with a threaded and an
/// inline device handle.
macro_rules! in_both_modes {
    ($(#[doc = $doc:literal])* $threaded:ident, $inline:ident => $body:ident) => {
        $(#[doc = $doc])*
        ///
        /// With a threaded device handle.
        pub fn $threaded<B: $crate::TestBackend>() {
            $body::<B>(cubert_runtime::config::DeviceHandleMode::Threaded)
        }

        $(#[doc = $doc])*
        ///
        /// With an inline device handle.
        pub fn $inline<B: $crate::TestBackend>() {
            $body::<B>(cubert_runtime::config::DeviceHandleMode::Inline)
        }
    };
}

mod backend;
pub mod support;

pub mod casts;
pub mod collectives;
pub mod concurrency;
pub mod config;
pub mod create_read;
pub mod device_handle;
pub mod differential;
pub mod dry_run;
pub mod errors;
pub mod foreign_memory;
pub mod fp8;
pub mod gather_scatter;
pub mod language;
pub mod launch;
pub mod leaks;
pub mod memory;
pub mod memory_pools;
pub mod model;
pub mod multi_device;
pub mod oom_model;
pub mod peer_copy;
pub mod profiling;
pub mod properties;
pub mod read_into;
pub mod staging;
pub mod streams;
pub mod tensors;
pub mod tune;
pub mod write;

pub use backend::{Client, ClientOptions, KernelOf, ResourceOf, TestBackend};

/// Calls `$callback! { $args ; [<every regular suite test, grouped by module>] [<every long
/// test, grouped by module>] }`. The one list of the suite's tests: [`testgen!`] and
/// [`ALL_TESTS`] are built from it.
#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_suite_test {
    ($callback:ident ! { $($args:tt)* }) => {
        $crate::$callback! { $($args)* ;
            [
            create_read {
                unchecked_reads_return_the_bytes_and_panic_on_failure,
                properties_mut_is_none_while_the_properties_are_shared,
                create_then_read_returns_the_same_bytes_threaded,
                create_then_read_returns_the_same_bytes_inline,
                read_async_futures_resolve_to_the_created_bytes_threaded,
                read_async_futures_resolve_to_the_created_bytes_inline,
                read_sees_every_launch_queued_before_it_threaded,
                read_sees_every_launch_queued_before_it_inline,
                read_of_a_view_returns_only_its_bytes,
                large_and_odd_sized_buffers_round_trip,
                get_resource_covers_exactly_the_handle_bytes,
                is_blocking_reports_the_device_handle_mode,
            }
            tensors {
                create_tensor_without_pitch_is_dense_row_major,
                read_of_pitched_tensor_returns_dense_rows,
                pitched_rank_three_tensor_round_trips,
                rank_one_and_contiguous_tensors_are_never_pitched,
                create_tensors_packs_aligned_views_of_one_allocation,
                create_tensors_from_slices_round_trips,
                empty_tensor_then_fill_reads_the_fill_value,
                empty_tensors_are_disjoint_views_of_one_allocation,
                read_tensor_with_transposed_strides_returns_the_transpose,
                read_tensor_variants_agree,
                kernels_on_pitched_buffers_keep_element_positions,
            }
            oom_model {
                out_of_memory_under_concurrency_matches_the_model,
            }
            casts {
                every_f16_bit_pattern_casts_like_the_half_crate,
                every_bf16_bit_pattern_casts_like_the_half_crate,
                values_round_into_the_half_types_like_the_half_crate,
            }
            fp8 {
                every_fp8_code_casts_to_every_type_like_the_host,
                every_fp8_code_round_trips_through_every_float_type,
                float_values_round_into_fp8_like_the_host,
                every_half_bit_pattern_rounds_into_fp8_like_the_host,
                kernel_loads_e4m3_scales_in_f32_and_stores_e5m2,
                fp8_comparisons_in_a_kernel_compare_values,
                arithmetic_on_fp8_is_refused_with_a_clear_error,
            }
            language {
                every_test_kernel_records_its_ir,
                plane_mma_of_bf16_integers_is_exact,
                plane_mma_of_f16_integers_is_exact,
                plane_mma_of_random_bf16_is_within_rounding,
                plane_mma_of_tf32_integers_is_exact,
                plane_mma_of_random_f32_rounds_inputs_to_tf32,
                plane_mma_of_fp8_matches_the_host,
                plane_group_mma_of_bf16_integers_is_exact,
                plane_group_mma_of_f16_integers_is_exact,
                plane_group_mma_of_every_start_width_and_group_is_exact,
                plane_group_mma_of_random_bf16_is_within_rounding,
                plane_group_mma_refuses_a_misplaced_operand,
                group_tensor_core_matmul_of_integers_is_exact,
                group_tensor_core_matmul_refuses_bad_arguments,
                tensor_core_matmul_of_integers_is_exact,
                tf32_tensor_core_matmul_of_integers_is_exact,
                tensor_core_matmul_refuses_bad_arguments,
                fragment_loads_give_each_unit_its_elements,
                generic_kernel_runs_for_every_numeric_element_type,
                generic_float_kernel_runs_for_f16_bf16_f32_f64,
                generic_copy_moves_every_scalar_type_unchanged,
                bool_arrays_hold_one_byte_and_compute_logic,
                comptime_values_specialize_the_kernel,
                comptime_if_records_only_the_taken_branch,
                mutable_scalar_parameters_can_be_reassigned,
                builtins_report_the_3d_launch_geometry,
                local_arrays_fill_index_sum_and_copy_on_let,
                out_of_bounds_store_fails_at_sync_and_keeps_in_bounds_writes,
                out_of_bounds_load_fails_at_the_next_read,
                if_else_chains_take_the_first_true_branch,
                if_used_as_a_value_gives_the_taken_branch,
                for_loops_cover_exclusive_inclusive_and_stepped_ranges,
                while_loops_run_until_the_condition_fails,
                loop_with_break_leaves_at_the_break,
                continue_skips_the_rest_of_the_iteration,
                early_return_ends_only_the_returning_unit,
                nested_loops_break_and_continue_the_innermost,
                short_circuit_skips_the_right_side,
                grid_stride_loops_visit_every_element_whatever_the_grid,
                integer_add_sub_mul_wrap_on_overflow,
                integer_division_and_remainder_by_zero_give_zero,
                integer_min_divided_by_minus_one_is_min,
                shift_amounts_are_taken_modulo_the_bit_width,
                bit_operations_match_rust,
                float_division_and_remainder_follow_ieee,
                float_operations_round_after_every_operation,
                unary_minus_negates_and_wraps,
                compound_assignment_updates_locals_and_array_elements,
                comparisons_follow_each_types_order,
                casts_between_every_pair_of_types_follow_the_rules,
                float_to_integer_casts_saturate_and_nan_gives_zero,
                integer_and_bool_casts_wrap_extend_and_test_for_zero,
                casts_to_half_types_round_to_nearest_even,
                exact_float_methods_match_std_bit_for_bit,
                transcendental_float_methods_are_within_four_ulps_of_std,
                float_functions_hold_over_their_whole_domain,
                half_float_methods_compute_in_f32_and_round_back,
                select_picks_by_condition,
                integer_abs_min_max_wrap_and_compare,
                shared_memory_is_seen_by_the_whole_cube_after_sync_cube,
                tree_reduction_with_sync_cube_in_a_loop_sums_each_cube,
                plane_reductions_fold_each_plane_in_lane_order,
                plane_votes_and_shuffles_read_the_planes_lanes,
                global_atomics_from_every_cube_lose_no_update,
                shared_atomics_count_within_each_cube,
                shared_memory_beyond_the_device_limit_is_refused_at_launch,
                shared_array_out_of_bounds_fails_the_launch,
                lines_of_every_width_load_and_store_their_elements,
                lines_of_views_at_unaligned_offsets_move_the_right_elements,
                lines_across_the_end_store_only_inside_and_fail_the_launch,
                tensor_rank_shape_and_strides_read_as_passed,
                strided_tensors_transpose_and_permute,
                malformed_tensor_arguments_are_refused_at_launch,
            }
            launch {
                launch_of_copy_kernel_writes_the_destination_threaded,
                launch_of_copy_kernel_writes_the_destination_inline,
                launch_unchecked_of_in_bounds_kernel_is_correct_threaded,
                launch_unchecked_of_in_bounds_kernel_is_correct_inline,
                dependent_launches_run_in_submission_order_threaded,
                dependent_launches_run_in_submission_order_inline,
                noop_kernel_launches_and_syncs,
                launches_recorded_back_to_back_each_see_their_own_arguments,
                launch_over_zero_cubes_does_nothing,
                dynamic_cube_count_is_read_from_its_buffer,
                fill_writes_the_value_to_every_element,
                copy_copies_exactly_len_elements,
                cast_f32_to_i32_truncates_and_saturates,
                cast_f32_to_f64_is_exact,
                add_matches_reference_for_f32_f64_i32,
                mul_matches_reference_for_f32_f64_i32,
                add_in_place_into_an_input_is_correct,
                add_and_mul_are_exact_for_every_length_and_alignment,
                reduce_sum_matches_reference,
                reduce_sum_splits_sum_every_row_for_any_grid,
                matmul_matches_reference,
                matmul_variants_compute_every_numeric_type,
                double_buffered_matmul_is_exact_on_every_backend,
                cube_dim_and_cube_count_selection_respect_device_limits,
            }
            errors {
                zero_byte_allocation_is_invalid_argument,
                zero_element_tensors_are_invalid_argument,
                impossible_allocation_is_buffer_too_big,
                out_of_memory_surfaces_at_sync_and_client_recovers,
                out_of_memory_surfaces_at_read_and_failed_handle_is_not_found,
                data_not_matching_its_shape_is_invalid_argument,
                read_tensor_with_bad_strides_is_invalid_argument,
                huge_broadcast_read_is_out_of_memory_and_client_recovers,
                view_outside_its_handle_is_invalid_argument,
                read_of_another_device_handle_is_not_found,
                launch_with_another_device_binding_is_refused,
                cube_dim_over_device_limit_is_too_many_resources,
                shared_memory_over_device_limit_is_too_many_resources,
                cube_count_over_device_limit_is_too_many_resources,
                ops_refuse_lengths_beyond_their_handles_at_the_call,
                out_of_bounds_kernel_fails_at_sync_and_spares_neighbours,
                queued_error_is_returned_once_by_flush_or_sync,
                sync_async_resolves_to_queued_errors,
            }
            memory {
                memory_usage_returns_to_baseline_after_handles_drop_threaded,
                memory_usage_returns_to_baseline_after_handles_drop_inline,
                dropped_handle_is_reused_on_same_stream,
                handles_dropped_before_their_allocation_runs_leave_nothing_in_use,
                memory_report_agrees_with_memory_usage,
                memory_cleanup_keeps_live_handles_intact,
                memory_cap_refuses_allocations_past_it_and_keeps_data,
                persistent_window_allocations_land_in_persistent_pool,
                persistent_window_closes_when_its_task_panics,
                persistent_window_applies_only_to_its_stream,
                allocation_mode_routes_until_reset,
                binding_of_dropped_handle_keeps_memory_alive_for_launch,
                views_keep_their_allocation_alive,
            }
            concurrency {
                with_stream_and_set_stream_pin_the_client,
                errors_stay_on_the_stream_that_caused_them,
                data_written_on_one_stream_is_seen_on_another,
                threads_sharing_a_client_see_their_own_data,
                stress_random_ops_on_per_thread_streams_match_host_model,
                stress_random_ops_in_inline_mode_match_host_model,
                stress_threads_sharing_handles_across_streams_match_host_model,
                stress_threads_over_several_devices_match_host_model,
            }
            model {
                random_sequences_match_the_model,
            }
            leaks {
                alloc_free_cycles_return_usage_to_baseline,
            }
            profiling {
                profile_returns_output_and_ordered_ticks,
                nested_profiles_measure_inner_within_outer,
                profile_of_panicking_work_is_an_error_and_client_keeps_working,
                disabled_profiling_records_nothing,
                execution_only_profiling_counts_launches_per_kernel,
                basic_profiling_times_every_launch,
                full_profiling_names_include_id_and_cube_count,
            }
            device_handle {
                exclusive_runs_the_section_work_and_returns_its_value_threaded,
                exclusive_runs_the_section_work_and_returns_its_value_inline,
                exclusive_blocks_other_threads_until_it_ends_threaded,
                exclusive_blocks_other_threads_until_it_ends_inline,
                panic_inside_exclusive_is_an_error_and_client_keeps_working_threaded,
                panic_inside_exclusive_is_an_error_and_client_keeps_working_inline,
                exclusive_sections_of_different_threads_never_overlap_threaded,
                exclusive_sections_of_different_threads_never_overlap_inline,
                nested_exclusive_sections_do_not_deadlock_threaded,
                nested_exclusive_sections_do_not_deadlock_inline,
                cloned_client_on_another_thread_shares_the_device_threaded,
                cloned_client_on_another_thread_shares_the_device_inline,
            }
            multi_device {
                to_client_copies_bytes_to_the_other_device,
                to_client_tensor_of_pitched_tensor_arrives_dense,
                to_client_tensor_with_bad_descriptor_is_invalid_argument,
                devices_account_their_memory_separately,
                round_trip_between_devices_preserves_bytes,
            }
            peer_copy {
                to_client_sees_the_kernels_queued_before_it_threaded,
                to_client_sees_the_kernels_queued_before_it_inline,
                source_rewritten_after_to_client_leaves_the_copy_intact_threaded,
                source_rewritten_after_to_client_leaves_the_copy_intact_inline,
                copy_is_ready_on_every_stream_of_the_destination,
            }
            collectives {
                all_reduce_sums_and_means_every_collective_type_threaded,
                all_reduce_sums_and_means_every_collective_type_inline,
                chained_all_reduces_over_all_devices_compound_threaded,
                chained_all_reduces_over_all_devices_compound_inline,
                all_reduce_from_one_thread_per_device_is_correct,
                send_and_recv_move_bytes_between_devices_threaded,
                send_and_recv_move_bytes_between_devices_inline,
                collective_arguments_are_checked_before_queuing,
                mismatched_calls_fail_on_every_device_threaded,
                mismatched_calls_fail_on_every_device_inline,
            }
            gather_scatter {
                all_gather_puts_every_part_at_its_rank_threaded,
                all_gather_puts_every_part_at_its_rank_inline,
                reduce_scatter_leaves_each_device_its_part_threaded,
                reduce_scatter_leaves_each_device_its_part_inline,
                broadcast_copies_the_roots_buffer_to_every_device_threaded,
                broadcast_copies_the_roots_buffer_to_every_device_inline,
                gather_scatter_arguments_are_checked,
                collectives_of_different_kinds_fail_on_every_device_threaded,
                collectives_of_different_kinds_fail_on_every_device_inline,
            }
            dry_run {
                a_dry_run_of_the_device_reaches_its_memory_peaks,
            }
            foreign_memory {
                imported_memory_is_used_in_place_and_released_after_its_last_use,
                imported_memory_lives_while_a_view_of_it_does,
                imported_bytes_count_in_no_usage_figure,
                bad_imports_are_refused_and_released,
            }
            memory_pools {
                persistent_memory_modes_place_requests_as_documented,
                installed_memory_pools_reshape_only_empty_pools,
            }
            streams {
                per_thread_policy_gives_each_thread_its_own_stream,
                per_task_policy_gives_each_clone_its_own_stream,
                single_policy_puts_every_client_on_one_stream,
                more_streams_than_device_queues_keep_every_stream_in_order,
                high_priority_streams_run_every_stream_in_order,
            }
            staging {
                reserve_staging_returns_usable_buffers_of_the_requested_sizes,
                huge_staging_request_is_an_out_of_memory_error,
                create_from_slice_pinned_round_trips,
                create_tensors_from_slices_pinned_round_trips,
                staging_keeps_buffer_contents,
                file_backed_bytes_upload_their_range_and_leave_the_file_unchanged,
            }
            properties {
                properties_and_features_are_consistent,
                pitch_alignment_option_is_reported_in_properties,
                enumerate_devices_lists_the_client_device,
                io_optimized_vector_sizes_are_halving_powers_of_two,
                feature_flags_say_what_works,
            }
            config {
                malformed_config_keys_warn_with_file_and_key_and_use_defaults,
                invalid_toml_warns_with_file_and_uses_defaults,
                bad_sections_and_environment_values_are_named_in_warnings,
                environment_that_is_not_utf8_is_ignored_with_a_warning,
            }
            tune {
                chosen_candidate_is_the_fastest_measured,
                failing_candidate_is_skipped,
                second_process_finds_the_result_on_disk_and_benchmarks_nothing,
                changed_candidate_set_tunes_again,
                devices_of_one_kind_and_concurrent_callers_tune_a_key_once,
                levels_select_the_candidates_tried,
                early_stop_and_budget_bound_the_cost,
                check_mode_skips_a_candidate_whose_output_differs,
                every_standard_variant_matches_the_reference,
                variant_with_an_undersized_output_is_refused_at_the_call,
                tuned_standard_ops_compute_the_reference,
                tuned_tensor_core_matmul_computes_the_exact_product,
            }
            read_into {
                read_into_fills_the_callers_buffer_after_queued_work,
                read_into_of_a_large_buffer_or_a_view_matches_read_one,
                read_tensor_into_gathers_a_strided_region,
                read_into_a_buffer_of_the_wrong_length_is_refused_and_untouched,
                lazy_read_is_ordered_when_made_and_collected_later,
            }
            write {
                write_replaces_the_bytes_in_stream_order,
                write_to_a_view_or_range_changes_only_those_bytes,
                write_tensor_fills_a_strided_region,
                bad_writes_are_refused_and_change_nothing,
                copy_moves_bytes_between_handles_in_stream_order,
                bad_copies_are_refused_and_change_nothing,
            }
            ]
            [
            model {
                a_million_random_operations_match_the_model,
            }
            language {
                f32_functions_hold_for_every_f32,
                f64_functions_hold_where_the_float_reduction_runs,
            }
            leaks {
                ten_million_alloc_free_cycles_return_usage_to_baseline,
            }
            concurrency {
                long_stress_threads_over_several_devices_match_host_model,
            }
            ]
        }
    };
}

/// Expands to one `#[test]` per suite test for backend `$backend` (a type implementing
/// [`TestBackend`]), in modules named like the suite's: `cargo test` lists
/// `create_read::create_then_read_returns_the_same_bytes_threaded` and so on.
///
/// `testgen!(Backend, ignore = "reason")` marks every test `#[ignore = "reason"]`, for
/// backends that need hardware (run them with `--include-ignored`).
///
/// The long tests go into a module `long` (`long::model::...`), marked
/// `#[ignore = "long: ..."]` (or with the backend's reason).
///
/// A test of the list may carry `#[ignore = "reason"]` (a known bug outside the suite,
/// named in the reason): every backend's test is ignored until the bug is fixed.
#[macro_export]
macro_rules! testgen {
    ($backend:ty) => {
        $crate::__for_each_suite_test!(__testgen_emit! { $backend });
    };
    ($backend:ty, ignore = $reason:literal) => {
        $crate::__for_each_suite_test!(__testgen_emit_ignored! { $backend, $reason });
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __testgen_emit {
    ($backend:ty ;
        [$($module:ident { $($(#[$attr:meta])* $name:ident),* $(,)? })*]
        [$($long_module:ident { $($long_name:ident),* $(,)? })*]
    ) => {
        $(
            mod $module {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[test]
                    $(#[$attr])*
                    fn $name() {
                        $crate::$module::$name::<$backend>();
                    }
                )*
            }
        )*
        mod long {
            #[allow(unused_imports)]
            use super::*;
            $(
                mod $long_module {
                    #[allow(unused_imports)]
                    use super::*;
                    $(
                        #[test]
                        #[ignore = "long: run in release with `-- --ignored long::` (scripts/reliability-long)"]
                        fn $long_name() {
                            $crate::$long_module::$long_name::<$backend>();
                        }
                    )*
                }
            )*
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __testgen_emit_ignored {
    ($backend:ty, $reason:literal ;
        [$($module:ident { $($(#[$attr:meta])* $name:ident),* $(,)? })*]
        [$($long_module:ident { $($long_name:ident),* $(,)? })*]
    ) => {
        $(
            mod $module {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[test]
                    #[ignore = $reason]
                    fn $name() {
                        $crate::$module::$name::<$backend>();
                    }
                )*
            }
        )*
        mod long {
            #[allow(unused_imports)]
            use super::*;
            $(
                mod $long_module {
                    #[allow(unused_imports)]
                    use super::*;
                    $(
                        #[test]
                        #[ignore = $reason]
                        fn $long_name() {
                            $crate::$long_module::$long_name::<$backend>();
                        }
                    )*
                }
            )*
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __suite_test_names {
    (;
        [$($module:ident { $($(#[$attr:meta])* $name:ident),* $(,)? })*]
        [$($long_module:ident { $($long_name:ident),* $(,)? })*]
    ) => {
        /// Every test of the suite, as `module::name` (long tests as `long::module::name`),
        /// in the order [`testgen!`] emits them.
        pub const ALL_TESTS: &[&str] = &[
            $($(concat!(stringify!($module), "::", stringify!($name)),)*)*
            $($(concat!("long::", stringify!($long_module), "::", stringify!($long_name)),)*)*
        ];
    };
}

__for_each_suite_test!(__suite_test_names! {});

#[cfg(test)]
mod tests {
    use super::ALL_TESTS;

    /// The suite's sources, by module name.
    const SOURCES: [(&str, &str); 38] = [
        ("casts", include_str!("casts.rs")),
        ("collectives", include_str!("collectives.rs")),
        ("concurrency", include_str!("concurrency.rs")),
        ("config", include_str!("config.rs")),
        ("create_read", include_str!("create_read.rs")),
        ("device_handle", include_str!("device_handle.rs")),
        ("errors", include_str!("errors.rs")),
        ("dry_run", include_str!("dry_run.rs")),
        ("foreign_memory", include_str!("foreign_memory.rs")),
        ("fp8", include_str!("fp8.rs")),
        ("gather_scatter", include_str!("gather_scatter.rs")),
        ("language", include_str!("language.rs")),
        ("language", include_str!("language/arithmetic.rs")),
        ("language", include_str!("language/arrays.rs")),
        ("language", include_str!("language/casts.rs")),
        ("language", include_str!("language/control_flow.rs")),
        ("language", include_str!("language/cooperative.rs")),
        ("language", include_str!("language/group_mma.rs")),
        ("language", include_str!("language/lines.rs")),
        ("language", include_str!("language/tensors.rs")),
        ("language", include_str!("language/mma.rs")),
        ("language", include_str!("language/math.rs")),
        ("launch", include_str!("launch.rs")),
        ("leaks", include_str!("leaks.rs")),
        ("memory", include_str!("memory.rs")),
        ("memory_pools", include_str!("memory_pools.rs")),
        ("model", include_str!("model.rs")),
        ("multi_device", include_str!("multi_device.rs")),
        ("oom_model", include_str!("oom_model.rs")),
        ("peer_copy", include_str!("peer_copy.rs")),
        ("profiling", include_str!("profiling.rs")),
        ("properties", include_str!("properties.rs")),
        ("read_into", include_str!("read_into.rs")),
        ("staging", include_str!("staging.rs")),
        ("streams", include_str!("streams.rs")),
        ("tensors", include_str!("tensors.rs")),
        ("tune", include_str!("tune.rs")),
        ("write", include_str!("write.rs")),
    ];

    fn defined_tests() -> Vec<String> {
        let mut names = Vec::new();
        for (module, source) in SOURCES {
            for line in source.lines().map(str::trim) {
                let generic = line
                    .strip_prefix("pub fn ")
                    .and_then(|rest| rest.strip_suffix("<B: TestBackend>() {"));
                let threaded = line
                    .strip_suffix(',')
                    .filter(|name| name.ends_with("_threaded") && !name.contains(' '));
                let inline = line
                    .split_once(" => ")
                    .map(|(name, _)| name)
                    .filter(|name| name.ends_with("_inline") && !name.contains(' '));
                if let Some(name) = generic.or(threaded).or(inline) {
                    names.push(format!("{module}::{name}"));
                }
            }
        }
        names
    }

    #[test]
    fn every_suite_test_is_listed_once_for_testgen() {
        let defined = defined_tests();
        for name in &defined {
            let long = format!("long::{name}");
            assert!(
                ALL_TESTS.contains(&name.as_str()) || ALL_TESTS.contains(&long.as_str()),
                "{name} is not in the test list"
            );
        }
        for name in ALL_TESTS {
            let plain = name.strip_prefix("long::").unwrap_or(name);
            assert!(
                defined.iter().any(|d| d == plain),
                "{name} is listed but not defined"
            );
            assert_eq!(
                ALL_TESTS.iter().filter(|n| *n == name).count(),
                1,
                "{name} twice"
            );
        }
        assert!(ALL_TESTS.len() >= 100, "only {} tests", ALL_TESTS.len());
    }
}
