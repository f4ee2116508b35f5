"""The two models agree: random walks of the abstract explorer, replayed on the concrete model.

The explorer proves invariants about the compact abstraction; the lockstep suite drives the
concrete pydantic model. This test walks the abstraction at random, translates each step into
the concrete events it stands for, and compares what both say about the work item after every
step (desired_state, reason_code, open turn, Goal state). A disagreement is a bug in one of them.
"""

from hypothesis import given, settings
from hypothesis import strategies as st
from recoverykit.model import ModelState, apply
from recoverykit.model import abstract as a
from recoverykit.model import abstract_events as ae
from recoverykit.model import events as ev
from recoverykit.model.catalogue import EffectClass, WorkKind
from recoverykit.model.explore import CONFIGURATIONS

FRESH = ("chat-unknown-tool", "goal-with-budget", "chat-and-goal")  # configurations built from submissions
DESIRED = {a.RUN: "run", a.PAUSED: "paused", a.CANCELLED: "cancelled", a.DONE: "done"}


class Replay:
    """Translates abstract event labels into concrete events; item ``i`` is work item ``w{i}``, Goal ``G{i}``."""

    def __init__(self, config: str):
        self.abstract = CONFIGURATIONS[config]
        self.concrete = ModelState()
        self.effect, self.request, self.call, self.old_call, self.approval = {}, {}, {}, {}, {}
        for i, w in enumerate(self.abstract[a.ITEMS]):
            kind = WorkKind.GOAL if w[a.KIND] == a.GOAL else WorkKind.CHAT_REQUEST
            self.effect[i] = EffectClass.UNKNOWN if w[a.EFFECT] == a.EFF_UNKNOWN else EffectClass.READ_ONLY
            self.concrete = apply(self.concrete, ev.Submit(work_id=f"w{i}", kind=kind, text="x"))
            if kind is WorkKind.GOAL:
                self.concrete = apply(self.concrete, ev.CreateGoal(
                    goal_id=f"G{i}", work_id=f"w{i}", requirements=("r",),
                    budget_limit=None if w[a.LIMIT] < 0 else w[a.LIMIT]))
        self.n = 0

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def events(self, label: str) -> list:
        name, _, arg = label.partition("(")
        if arg[:-1].isdigit():
            return self._item_events(name, int(arg[:-1]))
        simple = {"graceful_exit": [ev.GracefulExit()], "start": [ev.Start()],
                  "frontend_reload": [ev.FrontendReload()], "clock_jump": [ev.ClockJump(ms=2 * 3600 * 1000 + 1)],
                  "host_change": [ev.HostChange(host="host-b")], "stop_all_exit": [ev.StopAll(), ev.GracefulExit()]}
        if name in simple:
            return simple[name]
        if name == "crash":
            return [ev.Crash(point="tool.running", worker_only="worker" in label)]
        if name == "start_crash":
            return [ev.Start(crash_at=arg[:-1])]
        raise AssertionError(f"no translation for {label}")

    def _item_events(self, name: str, i: int) -> list:
        w, cs, work, goal = self.abstract[a.ITEMS][i], self.concrete, f"w{i}", f"G{i}"
        simple = {"pause": ev.Pause(work_id=work), "resume": ev.Resume(work_id=work), "end": ev.End(work_id=work),
                  "turn_complete": ev.TurnComplete(work_id=work), "todo_complete": ev.TodoComplete(goal_id=goal),
                  "wait_create": ev.WaitCreate(work_id=work, handle=f"h{i}", consumption_key=f"k{i}"),
                  "notify": ev.Notification(handle=f"h{i}", observed_version=0)}
        if name in simple:
            return [simple[name]]
        if name == "admit":
            return [ev.Admit(work_id=work, turn_id=self._id("t"))]
        if name == "provider_request":
            self.request[i] = self._id("r")
            return [ev.ProviderRequest(work_id=work, request_id=self.request[i])]
        if name == "provider_usage":
            return [ev.ProviderUsage(request_id=self.request[i], cumulative_tokens=w[a.ATT_L] + 1)]
        if name == "provider_response":
            return [ev.ProviderResponse(request_id=self.request[i], tokens=w[a.ATT_L] + 1, price_per_token=1)]
        if name == "decide_tool":
            self.call[i] = self._id("c")
            return []
        if name == "tool_dispatch":
            return [ev.ToolDispatch(work_id=work, call_id=self.call[i], effect_class=self.effect[i],
                                    approval_id=self.approval.get(i))]
        if name == "tool_commit":
            return [ev.ToolCommit(call_id=self.call[i])]
        if name == "reconcile":
            return [ev.ToolCommit(call_id=self.old_call[i])]
        if name in ("approve", "deny"):
            (self.approval[i],) = [k for k, v in cs.approvals.items() if v.status == "pending" and v.work_id == work]
            return [(ev.Approve if name == "approve" else ev.Deny)(approval_id=self.approval[i])]
        if name in ("grant", "revoke"):
            return [ev.PermissionChange(work_id=work, permission_ok=name == "grant")]
        if name == "budget_change":
            return [ev.BudgetChange(goal_id=goal, limit=cs.goals[goal].budget.limit + 2)]
        if name == "revise":
            return [ev.UpdateGoal(goal_id=goal, revision=cs.goals[goal].revision + 1)]
        if name in ("verify_met", "verify_unmet"):
            g = cs.goals[goal]
            return [ev.Verification(goal_id=goal, revision=g.revision, result_version=g.result_version,
                                    verdicts={"r": "met" if name == "verify_met" else "unmet"})]
        if name in ("blocked", "unblocked"):
            return [ev.Blocker(goal_id=goal, present=name == "blocked")]
        raise AssertionError(f"no translation for {name}({i})")

    def step(self, label: str, nxt: tuple) -> None:
        before = self.abstract[a.ITEMS]
        for event in self.events(label):
            self.concrete = apply(self.concrete, event)  # a rejection here is a disagreement too
        for i, w in enumerate(nxt[a.ITEMS]):
            if w[a.OLDUNK] and not before[i][a.OLDUNK]:
                self.old_call[i] = self.call[i]  # recovery recorded the call's outcome as unknown
        self.abstract = nxt

    def moves(self) -> list:
        s = self.abstract
        return [m for name, handler in ae.HANDLERS.items() if name not in ("retry", "stale_write")
                for i in (range(len(s[a.ITEMS])) if name in ae.ITEM_HANDLERS else (-1,))
                for m in handler(s, i)]

    def disagreements(self) -> list:
        out = []
        for i, w in enumerate(self.abstract[a.ITEMS]):
            intent, cs = self.concrete.work[f"w{i}"], self.concrete
            if DESIRED[w[a.DES]] != intent.desired_state.value:
                out.append((i, "desired_state", DESIRED[w[a.DES]], intent.desired_state.value))
            if a.REASONS[w[a.REASON]] is not intent.reason_code:
                out.append((i, "reason_code", a.REASONS[w[a.REASON]].value, intent.reason_code.value))
            if (w[a.TURN] == a.T_ACTIVE) != (cs.open_turn(f"w{i}") is not None):
                out.append((i, "open turn", w[a.TURN] == a.T_ACTIVE, cs.open_turn(f"w{i}") is not None))
            if w[a.GSTATE] != a.NO_GOAL and a.GOAL_STATES[w[a.GSTATE]] is not cs.goals[f"G{i}"].state:
                out.append((i, "goal state", a.GOAL_STATES[w[a.GSTATE]].value, cs.goals[f"G{i}"].state.value))
        return out


@settings(max_examples=80)
@given(st.sampled_from(FRESH), st.lists(st.integers(0, 10_000), min_size=1, max_size=16))
def test_abstract_and_concrete_models_agree(config, choices):
    replay = Replay(config)
    path = []
    for choice in choices:
        moves = replay.moves()
        if not moves:
            break
        label, nxt = moves[choice % len(moves)]
        path.append(label)
        replay.step(label, nxt)
        assert not replay.disagreements(), (path, replay.disagreements())


def test_replay_covers_recovery_paths():
    """A fixed walk through crash, repair, restricted turn and approval agrees step by step."""
    replay = Replay("chat-unknown-tool")
    for wanted in ("admit(0)", "decide_tool(0)", "tool_dispatch(0)", "crash(tree_kill)", "start", "admit(0)",
                   "decide_tool(0)", "tool_dispatch(0)", "approve(0)", "tool_dispatch(0)", "tool_commit(0)",
                   "reconcile(0)", "turn_complete(0)"):
        moves = dict(replay.moves())
        assert wanted in moves, (wanted, sorted(moves))
        replay.step(wanted, moves[wanted])
        assert not replay.disagreements(), (wanted, replay.disagreements())
    assert replay.concrete.work["w0"].desired_state == "done"
